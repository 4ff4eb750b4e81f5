// The tile runtime on a GPU (part of cuda_device.h): how a store's elements map to the compute role's
// threads, and the barriers around a store.
#pragma once
#include "kiln/tile/cuda_ptx.h"
#include "kiln/tile/cuda_watchdog.h"

namespace kiln::tile::cuda {

// Operations only the compute role has (its threads hold their state: ColSums).
inline void compute_only(const char*, abi::Loc at) {
  if (!is_compute()) fail_role(cuda_abi::kComputeOnly, 0, at);
}

// ---- compute helpers ----
// Before a role computes on blocks: the warp's earlier writes are visible to all its lanes; with
// `sync`, or after a store that read across warps, the whole role's are (and its reads of blocks
// this computation overwrites are done). kernel_block.h (Block::store) says when a store needs that.
inline void compute_begin(bool sync) {
  trace(cuda_abi::kTraceStore, 0);
  if (sync || warp_flag(kiln_tile_block.store_crossed))
    role_sync();
  else
    __syncwarp();
  trace(cuda_abi::kTraceStoreBarrier, 0);
}
// How many of a thread's `per` evaluations a store does before it writes any: the largest divisor
// of per up to `most` (no bounds test between them).
constexpr int unroll_for(int per, int most) {
  int u = most;
  while (per % u != 0) u--;
  return u;
}
// step(u0) for u0 = 0, by, 2 * by, ... < n: unrolled where that makes at most 16 steps (their
// shared-memory reads and shuffles then overlap across steps, and the indices are constants).
template <int n, int by, class Step>
inline void unrolled_steps(Step step) {
  if constexpr (n / by <= 16) {
#pragma unroll
    for (int u0 = 0; u0 < n; u0 += by) step(u0);
  } else {
    for (int u0 = 0; u0 < n; u0 += by) step(u0);
  }
}
// out[i * W + j] = f(i, j) for the H x W elements of a block, split over the role's threads
// (consecutive threads take consecutive columns, so a warp covers 32 columns of one row). Each
// compute thread evaluates several elements before it stores any, so their shared-memory reads
// overlap.
template <int H, int W, class T, class F>
inline void for_elements(T* out, F f) {
  constexpr int n = H * W, step = kComputeThreads;
  if (is_compute() && n % step == 0) {
    // up to 8 elements per thread at a time, with no bounds test between them: the evaluations
    // (shuffles of row reductions included) interleave
    constexpr int per = n / step, unroll = unroll_for(per, 8);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += step * unroll) {
      T v[unroll];
#pragma unroll
      for (int u = 0; u < unroll; u++) v[u] = f((e0 + u * step) / W, (e0 + u * step) % W);
#pragma unroll
      for (int u = 0; u < unroll; u++) out[e0 + u * step] = v[u];
    }
  } else {
    for (int e = role_rank(); e < n; e += role_size()) out[e] = f(e / W, e % W);
  }
}
// The same with four consecutive elements per evaluation (W a multiple of 128, so a warp's 32
// threads cover 128 columns of one row): f(i, j) returns them, put(p, v) writes them at p.
template <int H, int W, class T, class F, class Put>
inline void for_elements4(T* out, F f, Put put) {
  constexpr int n = H * W / 4, step = kComputeThreads;
  if (is_compute() && n % step == 0) {
    constexpr int per = n / step, unroll = unroll_for(per, 4);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += step * unroll) {
      decltype(f(0, 0)) v[unroll];
#pragma unroll
      for (int u = 0; u < unroll; u++) v[u] = f((e0 + u * step) * 4 / W, (e0 + u * step) * 4 % W);
#pragma unroll
      for (int u = 0; u < unroll; u++) put(out + (e0 + u * step) * 4, v[u]);
    }
  } else {
    for (int e = role_rank(); e < n; e += role_size()) put(out + e * 4, f(e * 4 / W, e * 4 % W));
  }
}
// Row-local blocks (rows a multiple of the compute warps, kernel_eval.h: row_local): warp w evaluates
// element rows w, w + warps, ..., each lane V consecutive columns 32 * V apart (W a multiple of
// 32 * V), up to eight evaluations before any store; f(i, j, k) returns the V elements from (i, j),
// the k-th span of the thread's row (j = V * lane + 32 * V * k), put(p, v) writes them at p. A
// data-movement role's store (one warp) goes element by element.
template <int H, int W, int V, class T, class F, class Put>
inline void for_rows(T* out, F f, Put put) {
  constexpr int span = 32 * V, per_row = W / span, per = H / KILN_TILE_COMPUTE_WARPS * per_row,
                unroll = unroll_for(per, 8);
  if (!is_compute()) {
    auto g = [&](int i, int j) { return f(i, j, j / span); };
    if constexpr (V == 4)
      for_elements4<H, W>(out, g, put);
    else
      for_elements<H, W>(out, g);
    return;
  }
  const int w = warp(), c0 = V * lane();
  auto row = [&](int u) { return w + u / per_row * KILN_TILE_COMPUTE_WARPS; };
  auto col = [&](int u) { return c0 + u % per_row * span; };
  unrolled_steps<per, unroll>([&](int u0) {
    decltype(f(0, 0, 0)) v[unroll];
#pragma unroll
    for (int u = 0; u < unroll; u++) v[u] = f(row(u0 + u), col(u0 + u), (u0 + u) % per_row);
#pragma unroll
    for (int u = 0; u < unroll; u++) put(out + row(u0 + u) * W + col(u0 + u), v[u]);
  });
}
// After a thread wrote a block: the writes are ordered before bulk copies out of it; `crossed`: the
// store read across warps, so the next one starts with a barrier.
inline void compute_end(bool crossed) {
  fence_async_shared();
  set_warp_flag(kiln_tile_block.store_crossed, crossed);
  set_warp_flag(kiln_tile_block.stored, true);
  trace(cuda_abi::kTraceStoreEnd, 0);
}

}  // namespace kiln::tile::cuda
