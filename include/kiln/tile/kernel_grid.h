// Where a kernel runs: this core's index and place on a 2D grid, and ranges of cores. Part of
// kernel.h, which defines the macros it uses (KILN_TILE_RT).
#pragma once
#include "kiln/tile/kernel_base.h"

namespace kiln::tile {

// ---- where am I ----
inline int core_index() { return KILN_TILE_RT(core_index)(); }
inline constexpr int num_cores() { return KILN_TILE_GRID_ROWS * KILN_TILE_GRID_COLS; }
inline constexpr int grid_rows() { return KILN_TILE_GRID_ROWS; }
inline constexpr int grid_cols() { return KILN_TILE_GRID_COLS; }
template <class T = void>
inline int core_x() {  // column of this core on a 2D grid
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: core_x() needs a 2D grid (Grid::grid2d); this program has a "
                "plain core count without topology, use core_index()");
  return KILN_TILE_RT(core_x)();
}
template <class T = void>
inline int core_y() {  // row of this core on a 2D grid
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: core_y() needs a 2D grid (Grid::grid2d); this program has a "
                "plain core count without topology, use core_index()");
  return KILN_TILE_RT(core_y)();
}

using CoreRange = abi::CoreRange;
inline CoreRange grid_row(int y) { return CoreRange{0, y, grid_cols(), y + 1}; }
inline CoreRange grid_col(int x) { return CoreRange{x, 0, x + 1, grid_rows()}; }
inline CoreRange whole_grid() { return CoreRange{0, 0, grid_cols(), grid_rows()}; }

}  // namespace kiln::tile
