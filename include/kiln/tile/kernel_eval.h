// How block expressions are evaluated: four elements at a time (F4), and where an element's
// evaluation reads its operands (Reach), which decides a GPU store's barriers. The backends'
// evaluation (cpu_eval.h, cuda_eval.h) provides the hooks declared at the end. Part of kernel.h.
#pragma once
#include "kiln/tile/kernel_base.h"

namespace kiln::tile::detail {

// Four consecutive elements of a row (j a multiple of 4): what a GPU store evaluates per thread when
// its block is a whole number of 128-element rows wide (one 16-byte access instead of four).
struct F4 {
  float v[4];
};
inline F4 splat(float x) { return F4{{x, x, x, x}}; }
template <class E>
F4 at4_of_scalars(const E& e, int i, int j) {  // the generic at4
  return F4{{e.at(i, j), e.at(i, j + 1), e.at(i, j + 2), e.at(i, j + 3)}};
}
struct alignas(16) F4Mem {
  float v[4];
};
struct alignas(8) B4Mem {
  bf16 h[4];
};
inline F4 load4(const float* p) {
  F4Mem m = *reinterpret_cast<const F4Mem*>(p);
  return F4{{m.v[0], m.v[1], m.v[2], m.v[3]}};
}
inline F4 load4(const bf16* p) {
  B4Mem m = *reinterpret_cast<const B4Mem*>(p);
  return F4{{to_f32(m.h[0]), to_f32(m.h[1]), to_f32(m.h[2]), to_f32(m.h[3])}};
}
inline void store4(float* p, const F4& x) {
  *reinterpret_cast<F4Mem*>(p) = F4Mem{{x.v[0], x.v[1], x.v[2], x.v[3]}};
}
inline void store4(bf16* p, const F4& x) {
  *reinterpret_cast<B4Mem*>(p) =
      B4Mem{{from_f32<bf16>(x.v[0]), from_f32<bf16>(x.v[1]), from_f32<bf16>(x.v[2]), from_f32<bf16>(x.v[3])}};
}

// Where a store's evaluation of element (i, j) reads an operand (GPU stores): at (i, j) itself, in
// element row i, or anywhere. On a GPU, stores split a block's elements over the compute warps
// (cuda::for_elements): an element (i, j) of a block is written by the same thread in every store
// into that block, and a "row-local" block's element row i by warp i % compute warps. A store
// needs a barrier over the compute warps only where it reads what another warp may have written:
// a block the role stored into, read anywhere but at the element itself, unless both it and the
// destination are row-local and the read stays in the row. Blocks taken with wait() came through
// the CB protocol (every warp waited for them) and need none.
enum Reach { kAtElement, kInRow, kAnywhere };
constexpr bool row_local(int height, int width, int warps) { return width == kTile || height % warps == 0; }

// ---- the backends' evaluation (cpu_eval.h, cuda_eval.h) ----
// Each defines kWarpRowReduce (a warp's lanes share every row reduction, so each evaluates all of
// them) and these; the GPU alone defines the two that only run where its flags say so.
// Element (i, j) of the row reduction (Reduce R, over n columns of a) by the calling warp's lanes.
template <int n, class R, class A>
inline float warp_reduce_row(const A& a, int i, int j);
// Whether a store into a block of height x width elements takes the column sums' (bound SumInto
// terms) additions into its pass (store_joined) instead of adding them first (ColSums::add_at).
template <int height, int width, class... Sums>
constexpr bool joins_store();
// out = the bound expression, element by element (a block of height x width elements).
template <int height, int width, bool Waited, class T, class B>
inline void store_elements(const B& bound, T* out);
// store_elements, adding the column sums of `sums` in the same pass.
template <int height, int width, bool Waited, class T, class B, class... Sums>
inline void store_joined(const B& bound, T* out, const Sums&... sums);
// out = (accumulate ? out : 0) + m (a bound Matmul) with f32 accumulation.
template <int height, int width, class T, class M>
inline void matmul_rows(const M& m, T* out, bool accumulate);

}  // namespace kiln::tile::detail
