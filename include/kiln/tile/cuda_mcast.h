// The tile runtime on a GPU (part of cuda_device.h): multicast of a block to other cores, through
// global memory or a cluster's shared memory.
#pragma once
#include "kiln/tile/cuda_cb.h"
#include "kiln/tile/cuda_cluster.h"
#include "kiln/tile/cuda_dma.h"
#include "kiln/tile/cuda_grid.h"

namespace kiln::tile::cuda {

// Multicast counters per (receiving core, CB): claimed by senders, receives asked for, payloads
// delivered, payloads copied out of the mailbox.
// Then per receive n, at n % kMaxSlots: the receiver's slot (kSlotOf + ...) and, from a sender in
// its cluster, n once the payload was written straight into that slot (kDirect + ...).
enum { kClaim = 0, kReady = 1, kFilled = 2, kConsumed = 3, kSlotOf = 4, kDirect = 4 + cuda_abi::kMaxSlots };
inline unsigned* mcast_counter(int core, int cb, int which) {
  return reinterpret_cast<unsigned*>(P().mcast) +
         (static_cast<long long>(core) * P().ncbs + cb) * cuda_abi::kMcastWords + which;
}
inline unsigned char* mailbox(int core, int cb) {
  return reinterpret_cast<unsigned char*>(P().cbs[cb].mailbox) +
         static_cast<long long>(core) * cb_layout(cb).block_bytes;
}

// Copies the block to every receiver's mailbox once that receiver asked for it and consumed the
// previous payload; returns when all are delivered.
inline int mcast(abi::BlockRef b, int dst, abi::CoreRange range, abi::Loc at) {
  check_cb(b.cb, at);
  check_cb(dst, at);
  check_range(range, at);
  settle_dma(b.cb, b.slot, at);
  role_sync();
  const unsigned char* blk = slot_data(b.cb, b.slot);
  const int bytes = static_cast<int>(cb_layout(dst).block_bytes);
  for (int y = range.y0; y < range.y1; y++)
    for (int x = range.x0; x < range.x1; x++) {
      int rc = y * P().grid_cols + x;
      if (rc == kiln_tile_block.core) continue;
      unsigned k = static_cast<unsigned>(
          from_leader([&]() -> long long { return atomicAdd(mcast_counter(rc, dst, kClaim), 1u) + 1; }));
      unsigned* ready = mcast_counter(rc, dst, kReady);
      unsigned* consumed = mcast_counter(rc, dst, kConsumed);
      wait_until([&] { return ld_volatile(ready) >= k && ld_volatile(consumed) + 1 >= k; },
                 cuda_abi::kWaitMcastSend, dst, at, rc);
      const unsigned at_k = k % cuda_abi::kMaxSlots;
      unsigned rank = 0;
      if (in_my_cluster(x, y, &rank)) {  // straight into the receiver's slot, through its shared memory
        __threadfence();                 // the receiver's slot number (published before `ready`)
        const unsigned slot = ld_volatile(mcast_counter(rc, dst, kSlotOf + at_k));
        const unsigned to = cluster_addr(smem_addr(slot_data(dst, static_cast<int>(slot))), rank);
        for (int q = role_rank(); q < bytes / 16; q += role_size())
          st_cluster_v4(to + q * 16, reinterpret_cast<const Vec16*>(blk)[q]);
        if (leader()) *mcast_counter(rc, dst, kDirect + at_k) = k;
      } else {  // through the receiver's mailbox in global memory
        unsigned char* box = mailbox(rc, dst);
        for (int q = role_rank(); q < bytes / 16; q += role_size())
          reinterpret_cast<Vec16*>(box)[q] = reinterpret_cast<const Vec16*>(blk)[q];
      }
      __threadfence();  // the payload (either way) before `filled`
      role_sync();
      if (leader()) atomicMax(mcast_counter(rc, dst, kFilled), k);
    }
  return kWriteId;  // delivered: nothing left to wait for
}

// Receives are transfer ids below zero: -(1 + (n << 10 | cb << 5 | slot)) for the n-th receive,
// counted in the CB's counters of the role's first warp.
inline int mcast_receive(abi::BlockRef b, abi::Loc at) {
  check_cb(b.cb, at);
  role_sync();
  long long n = from_leader([&]() -> long long {
    unsigned v = ++counters(b.cb).received;
    // the slot first, for a sender in this cluster to write into
    *mcast_counter(kiln_tile_block.core, b.cb, kSlotOf + v % cuda_abi::kMaxSlots) =
        static_cast<unsigned>(b.slot);
    __threadfence();
    atomicMax(mcast_counter(kiln_tile_block.core, b.cb, kReady), v);
    return v;
  });
  return -static_cast<int>(1 + ((n << 10) | (b.cb << 5) | b.slot));
}

}  // namespace kiln::tile::cuda
