// The tile runtime on a GPU (part of cuda_device.h): semaphores in global memory, local and remote.
#pragma once
#include "kiln/tile/cuda_cb.h"
#include "kiln/tile/cuda_grid.h"

namespace kiln::tile::cuda {

inline long long* sem_ptr(int core, int sem) {
  return reinterpret_cast<long long*>(P().sems) + static_cast<long long>(core) * P().nsems + sem;
}
inline void check_sem(int sem, abi::Loc at) {
  if (sem < 0 || sem >= P().nsems) fail_role(cuda_abi::kBadId, sem, at, 2);
}
// Every DMA read into this core's blocks has landed, and so has read its source. A data-movement
// role's wait() on a read returns before that (settle_dma); a semaphore signal is where another
// core may go on to overwrite what the read reads, so the role settles them all first (as on the
// CPU, where a read is done when its wait() returns). Reads of other roles are waited too: each
// completes within its own issue, so this never waits on anything else.
__noinline__ void settle_all_dma(abi::Loc at) {
  for (int cb = 0; cb < num_cbs(); cb++)
    for (unsigned s = 0; s < cb_layout(cb).slots; s++) settle_dma(cb, s, at);
}
// Before the leader signals another core: the role's DMA reads have read their sources and its
// earlier global writes are visible.
inline void release_role(abi::Loc at) {
  if (!is_compute()) settle_all_dma(at);  // a compute role's wait() on a read waits for it
  bulk_wait_all();
  __threadfence();
  role_sync();
}

inline void sem_set(int sem, long long v, abi::Loc at) {
  check_sem(sem, at);
  release_role(at);
  if (leader())
    atomicExch(reinterpret_cast<unsigned long long*>(sem_ptr(kiln_tile_block.core, sem)),
               static_cast<unsigned long long>(v));
}
inline void sem_inc(int sem, long long n, abi::Loc at) {
  check_sem(sem, at);
  release_role(at);
  if (leader())
    atomicAdd(reinterpret_cast<unsigned long long*>(sem_ptr(kiln_tile_block.core, sem)),
              static_cast<unsigned long long>(n));
}
inline void sem_wait(int sem, long long v, abi::Loc at) {
  check_sem(sem, at);
  role_sync();
  const long long* p = sem_ptr(kiln_tile_block.core, sem);
  wait_until(
      [&] {
        if (ld_volatile(p) < v) return false;
        __threadfence();
        return true;
      },
      cuda_abi::kWaitSemaphore, sem, at, v);
}
inline long long sem_value(int sem, abi::Loc at) {
  check_sem(sem, at);
  role_sync();
  return from_leader([&] { return ld_volatile(sem_ptr(kiln_tile_block.core, sem)); });
}
inline void sem_remote_inc(int sem, int x, int y, long long n, abi::Loc at) {
  check_sem(sem, at);
  check_range(x, x + 1LL, y, y + 1LL, at);
  release_role(at);
  if (leader())
    atomicAdd(reinterpret_cast<unsigned long long*>(sem_ptr(y * P().grid_cols + x, sem)),
              static_cast<unsigned long long>(n));
}
// f(core) for every core of r after the role's release, the role's threads sharing the cores (a
// leader alone would wait out each atomic's round trip).
template <class F>
inline void each_core_released(int sem, abi::CoreRange r, abi::Loc at, F f) {
  check_sem(sem, at);
  check_range(r, at);
  release_role(at);
  const int w = r.x1 - r.x0, n = w * (r.y1 - r.y0);
  for (int k = role_rank(); k < n; k += role_size())
    f(reinterpret_cast<unsigned long long*>(sem_ptr((r.y0 + k / w) * P().grid_cols + r.x0 + k % w, sem)));
}
inline void sem_mcast_set(int sem, abi::CoreRange r, long long v, abi::Loc at) {
  each_core_released(sem, r, at,
                     [&](unsigned long long* p) { atomicExch(p, static_cast<unsigned long long>(v)); });
}
inline void sem_mcast_inc(int sem, abi::CoreRange r, long long n, abi::Loc at) {
  each_core_released(sem, r, at,
                     [&](unsigned long long* p) { atomicAdd(p, static_cast<unsigned long long>(n)); });
}

}  // namespace kiln::tile::cuda
