// Shape helpers shared by the host entry points of shipped kernels (src/tile/ops): the 2D view a
// kernel sees, tile counts, and block sizes that divide a tile count.
#pragma once
#include <cstdint>
#include <utility>

#include "kiln/tensor.h"
#include "kiln/tile.h"

namespace kiln::tile::ops {

// (rows, cols) of t as kernels see it: all leading dims by the last one.
inline std::pair<int64_t, int64_t> view2d(const Tensor& t) {
  int64_t cols = t.dim() == 0 ? 1 : t.size(-1);
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

inline int64_t tiles(int64_t n) { return (n + kTileSize - 1) / kTileSize; }

// The largest of max_block, max_block / 2, ..., 1 that divides n tiles.
inline int block_dividing(int64_t n, int max_block) {
  int b = max_block;
  while (b > 1 && n % b != 0) b /= 2;
  return b;
}

}  // namespace kiln::tile::ops
