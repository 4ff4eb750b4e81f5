// ColSums' state on the CPU: a sum per column, added element by element. The GPU's: cuda_col_sums.h.
// Part of kernel.h, which defines the macros it uses (KILN_TILE_RT).
#pragma once
#include "kiln/tile/kernel_eval.h"

namespace kiln::tile::detail {

template <int H, int W>
class ColSumsState {
  float s_[W] = {};

 public:
  // add() of an expression (as_expr already applied) on behalf of the call at l.
  template <class X>
  void add_at(const X& ex, abi::Loc l) {
    KILN_TILE_RT(compute_only)("ColSums::add", l);
    auto b = ex.bind(l);
    for (int i = 0; i < H; i++)
      for (int j = 0; j < W; j++) s_[j] += b.at(i, j);
  }
  // Writes the sums into element row 0 of `out` (width W, `rows` element rows; the rest are 0).
  void write(float* out, int rows, abi::Loc l) const {
    KILN_TILE_RT(compute_only)("ColSums store", l);
    for (int j = 0; j < W; j++) out[j] = s_[j];
    for (int e = W; e < rows * W; e++) out[e] = 0.0f;
  }
};

}  // namespace kiln::tile::detail
