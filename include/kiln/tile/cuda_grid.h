// The tile runtime on a GPU (part of cuda_device.h): this core's place in the grid, its runtime
// args, tensors' dimensions, and checks of core ranges.
#pragma once
#include "kiln/tile/cuda_block_state.h"
#include "kiln/tile/cuda_watchdog.h"

namespace kiln::tile::cuda {

// ---- grid ----
inline int core_index() { return kiln_tile_block.core; }
inline int core_x() { return kiln_tile_block.core % P().grid_cols; }
inline int core_y() { return kiln_tile_block.core / P().grid_cols; }
inline const long long* args() { return kiln_tile_args; }
inline void tensor_dims(int t, long long* rows, long long* cols) {
  const cuda_abi::TensorParam& v = P().tensors[t];
  *rows = v.tiles ? (v.rows + 31) / 32 : v.rows;
  *cols = v.tiles ? (v.cols + 31) / 32 : v.cols;
}

// Cores [x0, x1) x [y0, y1) in 64 bits: one core's range (x, x + 1) cannot wrap.
inline void check_range(long long x0, long long x1, long long y0, long long y1, abi::Loc at) {
  int rows = P().cores / P().grid_cols;
  if (x0 < 0 || y0 < 0 || x0 >= x1 || y0 >= y1 || x1 > P().grid_cols || y1 > rows)
    fail_role(cuda_abi::kBadCoreRange, 0, at, x0, x1, y0, y1);
}
inline void check_range(abi::CoreRange r, abi::Loc at) { check_range(r.x0, r.x1, r.y0, r.y1, at); }

}  // namespace kiln::tile::cuda
