// The operations a kernel writes on blocks: elementwise arithmetic and math, broadcasts,
// reductions and matmul, each building a block expression (kernel_expr.h). Part of kernel.h, which
// defines the macros it uses (KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_expr.h"

namespace kiln::tile {

template <class E>
concept BlockExpr = detail::Expr<E>;
template <class E>
concept Operand = detail::Expr<E> || requires(E v) {
  static_cast<float>(v);
};

#define KILN_TILE_BINARY(OP, NAME)                                           \
  template <Operand A, Operand B>                                            \
  requires(BlockExpr<A> || BlockExpr<B>) auto OP(const A& a, const B& b) {   \
    auto ea = detail::as_expr(a);                                            \
    auto eb = detail::as_expr(b);                                            \
    return detail::Binary<detail::NAME, decltype(ea), decltype(eb)>{ea, eb}; \
  }
KILN_TILE_BINARY(operator+, AddOp)
KILN_TILE_BINARY(operator-, SubOp)
KILN_TILE_BINARY(operator*, MulOp)
KILN_TILE_BINARY(operator/, DivOp)
KILN_TILE_BINARY(maximum, MaxOp)
KILN_TILE_BINARY(minimum, MinOp)
#undef KILN_TILE_BINARY

#define KILN_TILE_UNARY(NAME, OPNAME)                       \
  template <BlockExpr A>                                    \
  auto NAME(const A& a) {                                   \
    auto ea = detail::as_expr(a);                           \
    return detail::Unary<detail::OPNAME, decltype(ea)>{ea}; \
  }
KILN_TILE_UNARY(operator-, NegOp)
KILN_TILE_UNARY(neg, NegOp)
KILN_TILE_UNARY(exp, ExpOp)
KILN_TILE_UNARY(log, LogOp)
KILN_TILE_UNARY(sqrt, SqrtOp)
KILN_TILE_UNARY(rsqrt, RsqrtOp)
KILN_TILE_UNARY(tanh, TanhOp)
KILN_TILE_UNARY(relu, ReluOp)
KILN_TILE_UNARY(sigmoid, SigmoidOp)
KILN_TILE_UNARY(abs, AbsOp)
KILN_TILE_UNARY(reciprocal, RecipOp)
#undef KILN_TILE_UNARY

// A (1, N) block (row vector in the first element row of its tiles) repeated down every row.
template <BlockExpr A>
auto bcast_rows(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::Bcast<true, false, decltype(ea)>{ea};
}
// An (M, 1) block (column vector in the first element column) repeated across every column.
template <BlockExpr A>
auto bcast_cols(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::Bcast<false, true, decltype(ea)>{ea};
}
// A (1, N) block's elements as an (R, 1) column of tiles of height TH (element (i, 0) = element
// (0, i)): per-row values kept compactly (a row of them moves as one contiguous copy) for
// bcast_cols.
template <int TH, int R = 1, BlockExpr A>
auto col_of(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::ColOf<R, TH, decltype(ea)>{ea};
}
// Element column K of an (M, 1) block repeated across every column (bcast_cols: column 0).
template <int K, BlockExpr A>
auto bcast_col(const A& a) {
  static_assert(K >= 0 && K < kTile,
                "kiln.tile: bcast_col<K>: K must be a column of the first tile (0 to 31)");
  auto ea = detail::as_expr(a);
  return detail::Bcast<false, true, decltype(ea), K>{ea};
}
// An (M, 1) expression (a row reduction) into element column K of the result, 0 elsewhere: sums of
// one pass side by side, `s.store(to_col<0>(reduce_sum<1>(a)) + to_col<1>(reduce_sum<1>(b)))`,
// read back with bcast_col<0>(s) and bcast_col<1>(s).
template <int K, BlockExpr A>
auto to_col(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::ToCol<K, decltype(ea)>{ea};
}
// A (1, 1) block's element (0, 0) everywhere.
template <BlockExpr A>
auto bcast_scalar(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::Bcast<true, true, decltype(ea)>{ea};
}
template <int Dim, BlockExpr A>
auto reduce_sum(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::Reduce<Dim, false, decltype(ea)>{ea};
}
template <int Dim, BlockExpr A>
auto reduce_max(const A& a) {
  auto ea = detail::as_expr(a);
  return detail::Reduce<Dim, true, decltype(ea)>{ea};
}
template <BlockExpr A, BlockExpr B>
auto matmul(const A& a, const B& b, KILN_TILE_LOC) {
  auto ea = detail::as_expr(a);
  auto eb = detail::as_expr(b);
  return detail::Matmul<decltype(ea), decltype(eb)>{ea, eb, detail::loc(line, file)};
}

}  // namespace kiln::tile
