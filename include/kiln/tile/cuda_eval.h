// How a GPU evaluates block expressions (kernel_eval.h's hooks): a warp's lanes share each row
// reduction, stores split a block's elements over the compute warps with a barrier only where one
// is needed, column sums join a store's pass, matmul takes an output element per thread. The CPU's:
// cpu_eval.h. Part of kernel.h, which defines the macros it uses (KILN_TILE_RT).
#pragma once
#include "kiln/tile/cuda_device.h"
#include "kiln/tile/kernel_eval.h"

namespace kiln::tile::detail {

// a row reduction's element is evaluated by every lane of a warp at once (shuffles)
inline constexpr bool kWarpRowReduce = true;

template <int n, class R, class A>
inline float warp_reduce_row(const A& a, int i, int j) {
  // every lane of a warp evaluates the same element row (stores give a warp 32 consecutive
  // columns of one row): the lanes split the row and combine by shuffles
  // (a fixed count of reads per lane, all issued before the sums: a tree, not a chain)
  const int lane = static_cast<int>(threadIdx.x & 31);
  constexpr int four = n % 128 == 0, per = four ? n / 128 : n / 32;
  float part[per];
#pragma unroll
  for (int k = 0; k < per; k++) {
    if constexpr (four) {  // four consecutive columns per lane
      F4 x = a.at4(i, 128 * k + 4 * lane);
      part[k] = R::combine(R::combine(x.v[0], x.v[1]), R::combine(x.v[2], x.v[3]));
    } else {
      part[k] = a.at(i, 32 * k + lane);
    }
  }
#pragma unroll
  for (int w = 1; w < per; w *= 2)
#pragma unroll
    for (int k = 0; k + w < per; k += 2 * w) part[k] = R::combine(part[k], part[k + w]);
  float acc = part[0];
  for (int o = 16; o > 0; o >>= 1) acc = R::combine(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  return j == 0 ? acc : 0.0f;
}

template <int height, int width, class... Sums>
constexpr bool joins_store() {
  constexpr int warps = KILN_TILE_COMPUTE_WARPS;
  constexpr bool rows = detail::row_local(height, width, warps);
  // the sums join the store's pass where its threads take the elements they sum
  return sizeof...(Sums) > 0 && rows && width % 128 == 0 &&
         ((Sums::sums_type::kJoinsStores && Sums::sums_type::height == height &&
           Sums::sums_type::width == width) &&
          ...);
}

template <int height, int width, bool Waited, class T, class B>
inline void store_elements(const B& bound, T* out) {
  constexpr int warps = KILN_TILE_COMPUTE_WARPS;
  constexpr bool rows = detail::row_local(height, width, warps);
  // a barrier before: where it reads what other warps wrote, or writes a block every warp may
  // have read anywhere; one after (at the next store): where other warps may still read what
  // it overwrites next
  constexpr bool crosses = B::crosses(detail::kAtElement, rows, warps);
  cuda::compute_begin(crosses || Waited);
  if constexpr (rows && width % 128 == 0)
    cuda::for_rows<height, width, 4>(
        out, [&](int i, int j, int) { return bound.at4(i, j); },
        [](T* p, const detail::F4& v) { detail::store4(p, v); });
  else if constexpr (rows && width != kTile)
    cuda::for_rows<height, width, 1>(
        out, [&](int i, int j, int) { return detail::from_f32<T>(bound.at(i, j)); },
        [](T* p, T v) { *p = v; });
  else if constexpr (width % 128 == 0)  // a warp's 32 threads cover 128 columns of one row
    cuda::for_elements4<height, width>(
        out, [&](int i, int j) { return bound.at4(i, j); },
        [](T* p, const detail::F4& v) { detail::store4(p, v); });
  else
    cuda::for_elements<height, width>(out, [&](int i, int j) { return detail::from_f32<T>(bound.at(i, j)); });
  cuda::compute_end(crosses || Waited);
}

// A row-local store whose pass also adds column sums (bound SumInto terms): each thread evaluates
// its elements of the sums' expressions beside the stored one's, so shared operands are read once.
template <int height, int width, bool Waited, class T, class B, class... Sums>
inline void store_joined(const B& bound, T* out, const Sums&... sums) {
  constexpr int warps = KILN_TILE_COMPUTE_WARPS;
  constexpr bool crosses = B::crosses(detail::kAtElement, true, warps) ||
                           (Sums::expr::crosses(detail::kAtElement, true, warps) || ...);
  cuda::compute_begin(crosses || Waited);
  cuda::for_rows<height, width, 4>(
      out,
      [&](int i, int j, int k) {
        (sums.sums->add4(k, sums.e.at4(i, j)), ...);
        return bound.at4(i, j);
      },
      [](T* p, const detail::F4& v) { detail::store4(p, v); });
  cuda::compute_end(crosses || Waited);
}

template <int height, int width, class T, class M>
inline void matmul_rows(const M& m, T* out, bool accumulate) {
  constexpr int K = decltype(m.a)::cols * kTile;
  // one output element per thread at a time, k in the same order as the CPU path; a(i, k) is a
  // shared-memory broadcast and b(k, j) is read by consecutive threads from consecutive banks
  cuda::compute_begin(true);
  for (int e = cuda::role_rank(); e < height * width; e += cuda::role_size()) {
    int i = e / width, j = e % width;
    float acc = accumulate ? detail::to_f32(out[e]) : 0.0f;
    for (int k = 0; k < K; k++) acc += m.a.at(i, k) * m.b.at(k, j);
    out[e] = detail::from_f32<T>(acc);
  }
  cuda::compute_end(true);
}

}  // namespace kiln::tile::detail
