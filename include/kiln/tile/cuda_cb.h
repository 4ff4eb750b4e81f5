// The tile runtime on a GPU (part of cuda_device.h): the circular-buffer operations (reserve, push,
// wait, pop) and a block's memory.
#pragma once
#include "kiln/tile/cuda_cb_layout.h"
#include "kiln/tile/cuda_ptx.h"
#include "kiln/tile/cuda_watchdog.h"

namespace kiln::tile::cuda {

inline void check_cb(int id, abi::Loc at) {
  if (id < 0 || id >= num_cbs()) fail_role(cuda_abi::kBadId, id, at, 0);
}

// The warp's count of blocks through a CB operation so far: lane 0 keeps it (in shared memory) and
// hands it to the other lanes, so no lane reads it while lane 0 moves it on.
inline unsigned warp_count(const unsigned& counter) {
  return __shfl_sync(0xffffffffu, (threadIdx.x & 31) == 0 ? counter : 0u, 0);
}

// The slot's DMA reads have landed. A data-movement role does not wait for its reads where the
// kernel waits them (transfer_wait): the bytes are settled where the block is used next, by the
// consumer's wait, or by the same role's next DMA into the block, DMA write or multicast out of it,
// access to its data or pop. So a reader keeps as many reads in flight as it has slots reserved.
// A compute role waits its reads eagerly, so its stores never check for pending ones.
inline void settle_dma(int cb, unsigned slot, abi::Loc at) {
  unsigned issued = *dma_count(cb, slot);
  if (issued > 0) wait_phase(dma_bar(cb, slot), (issued - 1) & 1, cuda_abi::kWaitDma, cb, at);
}

inline abi::BlockRef cb_reserve(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned n = cb_layout(id).slots, k = warp_count(c.reserved), slot = k % n;
  // the first pass over the ring finds every slot free: waiting on parity 1 of a fresh barrier
  // returns at once
  wait_phase(empty_bar(id, slot), ((k / n) & 1) ^ 1, cuda_abi::kWaitReserve, id, at, n);
  if (lane() == 0) c.reserved = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_push(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned k = warp_count(c.pushed), slot = k % cb_layout(id).slots;
  if (is_compute()) settle_dma(id, slot, at);  // a data-movement role's reads settle at the consumer
  __syncwarp();                                // every lane has read the count
  if (lane() == 0) c.pushed = k + 1;
  role_arrive(full_bar(id, slot));  // each lane releases its own writes to the block
}

inline abi::BlockRef cb_wait(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned n = cb_layout(id).slots, k = warp_count(c.waited), slot = k % n;
  wait_phase(full_bar(id, slot), (k / n) & 1, cuda_abi::kWaitBlock, id, at, n);
  settle_dma(id, slot, at);  // the producer's reads into the block, if it did not wait them
  if (lane() == 0) c.waited = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_pop(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned k = warp_count(c.popped);
  if (!is_compute()) settle_dma(id, k % cb_layout(id).slots, at);  // no read lands after the pop
  bulk_wait_read();  // bulk writes out of the block have read it
  __syncwarp();      // every lane has read the count
  if (lane() == 0) c.popped = k + 1;
  role_arrive(empty_bar(id, k % cb_layout(id).slots));  // each lane is done with the block
}

// A block handed to code that writes it no longer holds the padding of its last DMA read.
inline void* block_data(abi::BlockRef b, int write, abi::Loc at) {
  if (!is_compute()) settle_dma(b.cb, static_cast<unsigned>(b.slot), at);
  if (write) *pad_sig(b.cb, static_cast<unsigned>(b.slot)) = 0;
  return slot_data(b.cb, b.slot);
}

}  // namespace kiln::tile::cuda
