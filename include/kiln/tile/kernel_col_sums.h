// Column sums across blocks (ColSums, col_sums, sum_into); the state is the backend's
// (cpu_col_sums.h, cuda_col_sums.h). Part of kernel.h, which defines the macros it uses
// (KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_ops.h"

namespace kiln::tile {

// ---- column sums across blocks ----
// A running reduce_sum<0> over every block added to it: per column, the sum of all the rows added
// (f32), held by the compute role's threads until stored once into a (1, N) f32 block. On a GPU each
// thread keeps its columns' sums in registers and adds the elements its own stores would write
// (rows split over the warps), so adding a block reads only those, with no barrier and no shared
// memory written; the store combines the warps' sums in a fixed order. Blocks of H x W elements.
// Compute role only (a data-movement role fails with an error naming it).
template <int H, int W>
class ColSums : public detail::ColSumsState<H, W> {
  static_assert(H > 0 && W > 0 && W % kTile == 0,
                "kiln.tile: ColSums<H, W> sums blocks of H x W elements, W a multiple of 32");

 public:
  static constexpr int height = H, width = W;
  // Adds the column sums of `e` (H x W elements).
  template <BlockExpr E>
  void add(const E& e, KILN_TILE_LOC) {
    auto ex = detail::as_expr(e);
    using X = decltype(ex);
    static_assert(X::rows > 0 && X::cols > 0, "kiln.tile: ColSums::add of a broadcast expression");
    static_assert(X::rows * X::th == H && X::cols * kTile == W,
                  "kiln.tile: ColSums::add of an expression whose shape differs from the sums' blocks");
    this->add_at(ex, detail::loc(line, file));
  }
  // Also (the backend's ColSumsState): add_at(ex, l), add() of an expression (as_expr already
  // applied) on behalf of the call at l; write(out, rows, l), the sums into element row 0 of `out`
  // (width W, `rows` element rows; the rest are 0).
};
// Column sums over blocks of `cb`'s shape.
template <class CBT>
auto col_sums(const CBT&) {
  return ColSums<CBT::rows * CBT::th, CBT::cols * kTile>();
}

namespace detail {
template <class S, class E>
struct SumInto {
  using sums_type = S;
  using expr = E;
  S* sums;
  E e;
  auto bind(abi::Loc l) const {
    auto b = e.bind(l);
    return SumInto<S, decltype(b)>{sums, b};
  }
};
}  // namespace detail
// `block.store(e, sum_into(s, a), ...)`: stores e and adds a's column sums to s (ColSums::add) in the
// same pass over the block, as if the sums were added before the store. On a GPU, where the store
// and the sums give each thread the same elements, every operand element is read once for all of
// them; elsewhere it is ColSums::add and then the store.
template <int H, int W, BlockExpr E>
auto sum_into(ColSums<H, W>& s, const E& e) {
  auto ex = detail::as_expr(e);
  using X = decltype(ex);
  static_assert(X::rows > 0 && X::cols > 0, "kiln.tile: sum_into of a broadcast expression");
  static_assert(X::rows * X::th == H && X::cols * kTile == W,
                "kiln.tile: sum_into of an expression whose shape differs from the sums' blocks");
  return detail::SumInto<ColSums<H, W>, X>{&s, ex};
}

}  // namespace kiln::tile
