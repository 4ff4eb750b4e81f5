// Shape helpers shared by the host entry points of shipped kernels (src/tile/ops): the 2D view a
// kernel sees, tile counts, and block sizes that divide a tile count and keep the CBs in budget.
#pragma once
#include <algorithm>
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

// Shipped kernels size their blocks so that their CBs take at most this much memory per core
// (Program::cb_bytes): 208 KB, about 90% of what a core may have (Program::cb_bytes_limit: 227 KB
// of shared memory per thread block on an H100 or H200, the backend's limit, less the runtime's own state).
// Streamed rows want large chunks: every chunk costs each role a few CB operations (and on the CPU, with
// chunks of 2 tiles, a layernorm takes about twice as long as with whole rows).
inline constexpr int64_t kCBBudget = 208 * 1024;

// The largest block b <= max_block tiles dividing n tiles for which the CBs that declare(p, b)
// declares on a scratch program p fit kCBBudget; 1 when none does (the launch then says whether
// 1 fits the hard limit).
template <class Declare>
int block_within_budget(int64_t n, int max_block, Declare declare) {
  for (int b = static_cast<int>(std::min<int64_t>(n, max_block)); b > 1; b--) {
    if (n % b != 0) continue;
    Program p("cb_budget", "", Grid::cores(1));
    declare(p, b);
    if (p.cb_bytes() <= kCBBudget) return b;
  }
  return 1;
}

}  // namespace kiln::tile::ops
