// The tile runtime on a GPU (part of cuda_device.h): waiting for a transfer (a DMA read or write, a
// multicast send or receive).
#pragma once
#include "kiln/tile/cuda_dma.h"
#include "kiln/tile/cuda_mcast.h"

namespace kiln::tile::cuda {

inline void transfer_wait(int id, abi::Loc at) {
  if (id == kWriteId) {  // the role's bulk writes (each thread's own, or the leader's) have read the block
    bulk_wait_read();
    role_sync();
    return;
  }
  if (id >= 0) {  // DMA reads: the slot's dma barrier (a data-movement role's settle later)
    if (!is_compute()) return;
    const int cb = (id >> 5) & 31, slot = id & 31;
    wait_phase(dma_bar(cb, slot), (id >> 10) & 1, cuda_abi::kWaitDma, cb, at);
    return;
  }
  unsigned code = static_cast<unsigned>(-id - 1), n = code >> 10;
  int cb = static_cast<int>((code >> 5) & 31), slot = static_cast<int>(code & 31);
  int me = kiln_tile_block.core;
  role_sync();
  unsigned* filled = mcast_counter(me, cb, kFilled);
  wait_until(
      [&] {
        if (ld_volatile(filled) < n) return false;
        __threadfence();
        return true;
      },
      cuda_abi::kWaitMcastReceive, cb, at);
  unsigned char* blk = slot_data(cb, slot);
  *pad_sig(cb, static_cast<unsigned>(slot)) = 0;
  // a sender of this cluster wrote the block in place; any other left it in the mailbox
  if (ld_volatile(mcast_counter(me, cb, kDirect + n % cuda_abi::kMaxSlots)) != n) {
    const unsigned char* box = mailbox(me, cb);
    for (int q = role_rank(); q < static_cast<int>(cb_layout(cb).block_bytes / 16); q += role_size())
      reinterpret_cast<Vec16*>(blk)[q] = ld_cg_v4(box + q * 16);
  }
  role_sync();
  if (leader()) atomicMax(mcast_counter(me, cb, kConsumed), n);
}

}  // namespace kiln::tile::cuda
