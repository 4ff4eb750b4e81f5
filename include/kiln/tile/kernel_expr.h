// Block expressions: the expression nodes (elementwise ops, broadcasts, reductions, matmul) a store
// evaluates; kernel_ops.h builds them. Part of kernel.h.
#pragma once
#include "kiln/tile/kernel_eval.h"

namespace kiln::tile {

// ---- block expressions: evaluated element by element in f32 when stored into a block ----
// Every expression has compile-time shape R x C in tiles of TH x 32 elements (th: 32, or fewer for
// short tiles); 0 means "broadcasts to any".
namespace detail {

template <class T, int R, int C, int TH, bool Waited = false>
struct BoundBlock {  // a block's memory during one store
  static constexpr int rows = R, cols = C, th = TH;
  static constexpr bool crosses(Reach r, bool dest_row_local, int warps) {
    return !Waited && r != kAtElement &&
           (r == kAnywhere || !dest_row_local || !row_local(R * TH, C * kTile, warps));
  }
  const T* p;
  float at(int i, int j) const { return to_f32(p[i * (C * kTile) + j]); }
  F4 at4(int i, int j) const { return load4(p + i * (C * kTile) + j); }
};

struct Const {
  static constexpr int rows = 0, cols = 0, th = 0;
  float v;
  Const bind(abi::Loc) const { return *this; }
  static constexpr bool crosses(Reach, bool, int) { return false; }
  float at(int, int) const { return v; }
  F4 at4(int, int) const { return splat(v); }
};

constexpr int merge_dim(int a, int b) { return a == 0 ? b : a; }
constexpr bool dims_match(int a, int b) { return a == 0 || b == 0 || a == b; }

template <class Op, class A, class B>
struct Binary {
  static_assert(dims_match(A::rows, B::rows) && dims_match(A::cols, B::cols),
                "kiln.tile: elementwise op on blocks of different shapes (in tiles); broadcast the smaller "
                "one with bcast_rows / bcast_cols / bcast_scalar");
  static_assert(dims_match(A::th, B::th), "kiln.tile: elementwise op on blocks of different tile heights");
  static constexpr int rows = merge_dim(A::rows, B::rows), cols = merge_dim(A::cols, B::cols),
                       th = merge_dim(A::th, B::th);
  A a;
  B b;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    auto bb = b.bind(l);
    return Binary<Op, decltype(ba), decltype(bb)>{ba, bb};
  }
  static constexpr bool crosses(Reach r, bool d, int w) { return A::crosses(r, d, w) || B::crosses(r, d, w); }
  float at(int i, int j) const { return Op::apply(a.at(i, j), b.at(i, j)); }
  F4 at4(int i, int j) const {
    F4 x = a.at4(i, j), y = b.at4(i, j);
    return F4{{Op::apply(x.v[0], y.v[0]), Op::apply(x.v[1], y.v[1]), Op::apply(x.v[2], y.v[2]),
               Op::apply(x.v[3], y.v[3])}};
  }
};

template <class Op, class A>
struct Unary {
  static constexpr int rows = A::rows, cols = A::cols, th = A::th;
  A a;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    return Unary<Op, decltype(ba)>{ba};
  }
  static constexpr bool crosses(Reach r, bool d, int w) { return A::crosses(r, d, w); }
  float at(int i, int j) const { return Op::apply(a.at(i, j)); }
  F4 at4(int i, int j) const {
    F4 x = a.at4(i, j);
    return F4{{Op::apply(x.v[0]), Op::apply(x.v[1]), Op::apply(x.v[2]), Op::apply(x.v[3])}};
  }
};

// Broadcasts: Dim0 = the first element row repeats down, Dim1 = the first element column repeats
// across, both = element (0, 0) everywhere.
template <bool Dim0, bool Dim1, class A, int Col = 0>
struct Bcast {
  static_assert(!Dim0 || A::rows == 1, "kiln.tile: bcast_rows needs a (1, N) block (a row vector)");
  static_assert(!Dim1 || A::cols == 1, "kiln.tile: bcast_cols needs an (M, 1) block (a column vector)");
  static constexpr int rows = Dim0 ? 0 : A::rows, cols = Dim1 ? 0 : A::cols, th = Dim0 ? 0 : A::th;
  A a;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    return Bcast<Dim0, Dim1, decltype(ba), Col>{ba};
  }
  static constexpr bool crosses(Reach r, bool d, int w) {  // element column Col of the row, or row 0
    return A::crosses(Dim0 || r == kAnywhere ? kAnywhere : kInRow, d, w);
  }
  float at(int i, int j) const { return a.at(Dim0 ? 0 : i, Dim1 ? Col : j); }
  F4 at4(int i, int j) const {
    if constexpr (Dim1)
      return splat(a.at(Dim0 ? 0 : i, Col));  // one element per row (or of the block)
    else
      return a.at4(0, j);
  }
};

// A row vector's elements down a column: element (i, 0) of an (R, 1) column of tiles of height TH
// is element (0, i) of A, a (1, N) block; the rest of the column's tiles read as 0.
template <int R, int TH, class A>
struct ColOf {
  static_assert(A::rows == 1, "kiln.tile: col_of needs a (1, N) block (a row vector)");
  static_assert(R * TH <= A::cols * kTile,
                "kiln.tile: col_of<TH, R>: the column is longer than the row vector");
  static constexpr int rows = R, cols = 1, th = TH;
  A a;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    return ColOf<R, TH, decltype(ba)>{ba};
  }
  static constexpr bool crosses(Reach, bool d, int w) { return A::crosses(kAnywhere, d, w); }
  float at(int i, int j) const { return j == 0 ? a.at(0, i) : 0.0f; }
  F4 at4(int i, int j) const { return j == 0 ? F4{{a.at(0, i), 0.0f, 0.0f, 0.0f}} : splat(0.0f); }
};

// Element column K holds A's element column 0, the other columns 0: several row reductions side
// by side in one block, evaluated in one store (on a GPU every lane of the warp takes part in each).
template <int K, class A>
struct ToCol {
  static_assert(A::cols == 1, "kiln.tile: to_col needs an (M, 1) expression (a row reduction)");
  static_assert(K >= 0 && K < kTile, "kiln.tile: to_col<K>: K must be a column of the first tile (0 to 31)");
  static constexpr int rows = A::rows, cols = 1, th = A::th;
  A a;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    return ToCol<K, decltype(ba)>{ba};
  }
  static constexpr bool crosses(Reach r, bool d, int w) {
    return A::crosses(r == kAnywhere ? r : kInRow, d, w);
  }
  float at(int i, int j) const {
    if constexpr (kWarpRowReduce) {
      const float v = a.at(i, 0);  // unconditionally: a row reduction's shuffles need the whole warp
      return j == K ? v : 0.0f;
    } else {
      return j == K ? a.at(i, 0) : 0.0f;
    }
  }
  F4 at4(int i, int j) const { return at4_of_scalars(*this, i, j); }
};

// Reduction over dim 0 (rows: a (1, N) result in element row 0, of any tile height, a row vector
// of short tiles included) or dim 1 (columns: (M, 1) result in element column 0); f32
// accumulation; the rest of the result tiles is 0.
template <int Dim, bool Max, class A>
struct Reduce {
  static_assert(Dim == 0 || Dim == 1, "kiln.tile: reduce dim must be 0 (over rows) or 1 (over columns)");
  static_assert(A::rows > 0 && A::cols > 0, "kiln.tile: reduce of a broadcast expression");
  static constexpr int rows = Dim == 0 ? 1 : A::rows, cols = Dim == 1 ? 1 : A::cols,
                       th = Dim == 0 ? 0 : A::th;
  A a;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    return Reduce<Dim, Max, decltype(ba)>{ba};
  }
  static constexpr bool crosses(Reach r, bool d, int w) {  // the element's row, or its column
    return A::crosses(Dim == 0 || r == kAnywhere ? kAnywhere : kInRow, d, w);
  }
  static float combine(float acc, float v) { return Max ? (v > acc || v != v ? v : acc) : acc + v; }
  float at(int i, int j) const {
    constexpr int n = Dim == 0 ? A::rows * A::th : A::cols * kTile;
    if constexpr (Dim == 1 && kWarpRowReduce) return warp_reduce_row<n, Reduce>(a, i, j);
    if ((Dim == 0 && i != 0) || (Dim == 1 && j != 0)) return 0.0f;
    // eight interleaved accumulators, combined pairwise: a long row's f32 sum loses less (and the
    // loop vectorizes)
    float acc[8];
    for (float& x : acc) x = Max ? -inf() : 0.0f;
    for (int k = 0; k < n; k++) acc[k % 8] = combine(acc[k % 8], Dim == 0 ? a.at(k, j) : a.at(i, k));
    for (int w = 4; w > 0; w /= 2)
      for (int k = 0; k < w; k++) acc[k] = combine(acc[k], acc[k + w]);
    return acc[0];
  }
  F4 at4(int i, int j) const {
    if constexpr (Dim == 0) {  // four column sums at once
      if (i != 0) return splat(0.0f);
      F4 acc = splat(Max ? -inf() : 0.0f);
      for (int k = 0; k < A::rows * A::th; k++) {
        F4 x = a.at4(k, j);
        for (int c = 0; c < 4; c++) acc.v[c] = combine(acc.v[c], x.v[c]);
      }
      return acc;
    } else {
      return at4_of_scalars(*this, i, j);
    }
  }
};

template <class A, class B>
struct Matmul {
  static_assert(A::rows > 0 && A::cols > 0 && B::rows > 0 && B::cols > 0,
                "kiln.tile: matmul of a broadcast expression");
  static_assert(A::cols == B::rows, "kiln.tile: matmul needs a (M, K) block times a (K, N) block");
  static_assert(A::th == kTile && B::th == kTile, "kiln.tile: matmul takes blocks of 32x32 tiles");
  static constexpr int rows = A::rows, cols = B::cols, th = kTile;
  A a;
  B b;
  abi::Loc where;
  auto bind(abi::Loc l) const {
    auto ba = a.bind(l);
    auto bb = b.bind(l);
    return Matmul<decltype(ba), decltype(bb)>{ba, bb, where};
  }
  static constexpr bool crosses(Reach, bool, int) { return true; }  // and a mapping of its own (matmul_rows)
  float at(int i, int j) const {  // generic path (matmul inside a larger expression)
    float acc = 0;
    for (int k = 0; k < A::cols * kTile; k++) acc += a.at(i, k) * b.at(k, j);
    return acc;
  }
  F4 at4(int i, int j) const { return at4_of_scalars(*this, i, j); }
};

template <class E>
struct IsMatmul {
  static constexpr bool value = false;
};
template <class A, class B>
struct IsMatmul<Matmul<A, B>> {
  static constexpr bool value = true;
};

template <class E>
concept Expr = requires(const E& e) {
  E::rows;
  E::cols;
  E::th;
  e.bind(abi::Loc{});
};

// clang-format off
struct AddOp { static float apply(float a, float b) { return a + b; } };
struct SubOp { static float apply(float a, float b) { return a - b; } };
struct MulOp { static float apply(float a, float b) { return a * b; } };
struct DivOp { static float apply(float a, float b) { return a / b; } };
struct MaxOp { static float apply(float a, float b) { return a > b || a != a ? a : b; } };
struct MinOp { static float apply(float a, float b) { return a < b || a != a ? a : b; } };
struct NegOp { static float apply(float a) { return -a; } };
struct ExpOp { static float apply(float a) { return m_exp(a); } };
struct LogOp { static float apply(float a) { return m_log(a); } };
struct SqrtOp { static float apply(float a) { return m_sqrt(a); } };
struct RsqrtOp { static float apply(float a) { return 1.0f / m_sqrt(a); } };
struct TanhOp { static float apply(float a) { return m_tanh(a); } };
struct ReluOp { static float apply(float a) { return a > 0 ? a : 0.0f; } };
struct SigmoidOp { static float apply(float a) { return 1.0f / (1.0f + m_exp(-a)); } };
struct AbsOp { static float apply(float a) { return m_abs(a); } };
struct RecipOp { static float apply(float a) { return 1.0f / a; } };
// clang-format on

// Blocks (scoped ones included) enter expressions as plain block handles; numbers as constants.
template <class E>
auto as_expr(const E& e) {
  if constexpr (requires { typename E::expr_type; })
    return typename E::expr_type(e.ref());
  else if constexpr (requires { E::rows; })
    return e;
  else
    return Const{static_cast<float>(e)};
}

}  // namespace detail

}  // namespace kiln::tile
