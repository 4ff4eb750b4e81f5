// The tile kernel language: what a kernel source (reader / compute / writer roles) is written
// against. The same source compiles with the host compiler (each core a worker of cooperative
// roles calling the backend through the abi::Runtime table) and with NVRTC when the generated
// prelude defines KILN_TILE_CUDA (each core a thread block, roles on warps, see cuda_device.h).
// It stays freestanding for NVRTC. The generated prelude defines KILN_TILE_GRID_2D/ROWS/COLS and the
// program's CBs, accessors, semaphores and arguments.
#pragma once
#include "kiln/tile/abi.h"

#ifndef KILN_TILE_GRID_2D
#define KILN_TILE_GRID_2D 0
#endif
#ifndef KILN_TILE_GRID_ROWS
#define KILN_TILE_GRID_ROWS 1
#endif
#ifndef KILN_TILE_GRID_COLS
#define KILN_TILE_GRID_COLS 1
#endif

#ifdef KILN_TILE_CUDA
#include "kiln/tile/cuda_device.h"
// backend calls go straight to the device runtime
#define KILN_TILE_RT(fn) ::kiln::tile::cuda::fn
#else
#define KILN_TILE_RT(fn) ::kiln::tile::detail::rt->fn
#endif

// Source positions for messages. NVRTC may lack the builtins: positions then read "?:0".
#ifndef KILN_TILE_CUDA
#define KILN_TILE_HAVE_LOC 1
#elif defined(__has_builtin)
#if __has_builtin(__builtin_LINE) && __has_builtin(__builtin_FILE)
#define KILN_TILE_HAVE_LOC 1
#endif
#endif
#ifdef KILN_TILE_HAVE_LOC
#define KILN_TILE_LOC int line = __builtin_LINE(), const char *file = __builtin_FILE()
#else
#define KILN_TILE_LOC int line = 0, const char *file = "?"
#endif

namespace kiln::tile {

inline constexpr int kTile = 32;

// bfloat16 storage: 16 bits in memory, computed in f32.
struct bf16 {
  unsigned short bits;
};

enum class Indexing { Tiles, Elements };

namespace detail {

#ifndef KILN_TILE_CUDA
static const abi::Runtime* rt = nullptr;  // set by the generated entry point
#endif
inline abi::Loc loc(int line, const char* file) { return abi::Loc{file, line}; }
// Where a scoped block's implicit push/pop happens: the end of the scope opened at `taken`.
inline abi::Loc scope_end(abi::Loc taken) { return abi::Loc{taken.file, -taken.line}; }

inline float to_f32(float x) { return x; }
template <class T>
inline T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}
#ifdef KILN_TILE_CUDA
inline float to_f32(bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }
template <>
inline bf16 from_f32<bf16>(float x) {  // round to nearest even in hardware
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return bf16{h};
}
inline float inf() { return __int_as_float(0x7f800000); }
inline float m_exp(float a) { return expf(a); }
inline float m_log(float a) { return logf(a); }
inline float m_sqrt(float a) { return sqrtf(a); }
inline float m_tanh(float a) { return tanhf(a); }
inline float m_abs(float a) { return fabsf(a); }
#else
inline float to_f32(bf16 x) {
  unsigned u = static_cast<unsigned>(x.bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
template <>
inline bf16 from_f32<bf16>(float x) {  // round to nearest even, NaN stays NaN
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fc0};
  return bf16{static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline float inf() { return __builtin_inff(); }
inline float m_exp(float a) { return __builtin_expf(a); }
inline float m_log(float a) { return __builtin_logf(a); }
inline float m_sqrt(float a) { return __builtin_sqrtf(a); }
inline float m_tanh(float a) { return __builtin_tanhf(a); }
inline float m_abs(float a) { return __builtin_fabsf(a); }
#endif

// Grid flags as dependent values, so a static_assert fires only when the op is used.
template <class T>
inline constexpr bool kGrid2D = KILN_TILE_GRID_2D != 0;

}  // namespace detail

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

// ---- block expressions: evaluated element by element in f32 when stored into a block ----
// Every expression has compile-time shape R x C in tiles of TH x 32 elements (th: 32, or fewer for
// short tiles); 0 means "broadcasts to any".
namespace detail {

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
#ifdef KILN_TILE_CUDA
    const float v = a.at(i, 0);  // unconditionally: a row reduction's shuffles need the whole warp
    return j == K ? v : 0.0f;
#else
    return j == K ? a.at(i, 0) : 0.0f;
#endif
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
#ifdef KILN_TILE_CUDA
    if constexpr (Dim == 1) {
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
          part[k] = combine(combine(x.v[0], x.v[1]), combine(x.v[2], x.v[3]));
        } else {
          part[k] = a.at(i, 32 * k + lane);
        }
      }
#pragma unroll
      for (int w = 1; w < per; w *= 2)
#pragma unroll
        for (int k = 0; k + w < per; k += 2 * w) part[k] = combine(part[k], part[k + w]);
      float acc = part[0];
      for (int o = 16; o > 0; o >>= 1) acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, o));
      return j == 0 ? acc : 0.0f;
    }
#endif
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

// ---- column sums across blocks ----
// A running reduce_sum<0> over every block added to it: per column, the sum of all the rows added
// (f32), held by the compute role's threads until stored once into a (1, N) f32 block. On a GPU each
// thread keeps its columns' sums in registers and adds the elements its own stores would write
// (rows split over the warps), so adding a block reads only those, with no barrier and no shared
// memory written; the store combines the warps' sums in a fixed order. Blocks of H x W elements.
// Compute role only (a data-movement role fails with an error naming it).
template <int H, int W>
class ColSums {
  static_assert(H > 0 && W > 0 && W % kTile == 0,
                "kiln.tile: ColSums<H, W> sums blocks of H x W elements, W a multiple of 32");
#ifdef KILN_TILE_CUDA
  static constexpr int kWarps = KILN_TILE_COMPUTE_WARPS;
  // Blocks of fewer rows than warps share each row among kQ warps (each a part of the columns), in
  // kP groups of rows; a warp's lanes take kV consecutive columns, 32 * kV apart.
  static constexpr int kQ =
      H % kWarps == 0 || kWarps % H != 0 || W % (kTile * (kWarps / H)) != 0 ? 1 : kWarps / H;
  static constexpr int kP = kWarps / kQ, kPart = W / kQ, kV = kPart % 128 == 0 ? 4 : 1,
                       kChunks = kPart / (32 * kV);
  // the threads take the elements the stores into a row-local block give them (for_rows)
  static constexpr bool kOwn = kQ == 1 && detail::row_local(H, W, kWarps);
  float s_[kChunks * kV] = {};
  // column of the thread's sum k
  static int col(int k) { return cuda::warp() / kP * kPart + kV * cuda::lane() + k / kV * 32 * kV + k % kV; }
#else
  float s_[W] = {};
#endif

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
    add_at(ex, detail::loc(line, file));
  }
  // add() of an expression (as_expr already applied) on behalf of the call at l.
  template <class X>
  void add_at(const X& ex, abi::Loc l) {
    KILN_TILE_RT(compute_only)("ColSums::add", l);
    auto b = ex.bind(l);
#ifdef KILN_TILE_CUDA
    cuda::compute_begin(decltype(b)::crosses(kOwn ? detail::kAtElement : detail::kAnywhere, kOwn, kWarps));
    const int c0 = col(0);
    for (int i = cuda::warp() % kP; i < H; i += kP) {
#pragma unroll
      for (int k = 0; k < kChunks; k++) {
        if constexpr (kV == 4)
          add4(k, b.at4(i, c0 + k * 128));
        else
          s_[k] += b.at(i, c0 + k * 32);
      }
    }
    cuda::trace(cuda_abi::kTraceStoreEnd, 0);
#else
    for (int i = 0; i < H; i++)
      for (int j = 0; j < W; j++) s_[j] += b.at(i, j);
#endif
  }
#ifdef KILN_TILE_CUDA
  // A store of a block of H x W elements going through cuda::for_rows four columns at a time hands
  // each thread the elements this thread sums (sum_into: the sums then join the store's pass).
  static constexpr bool kJoinsStores = kOwn && kV == 4;
  // Adds four consecutive columns of a row at chunk k (columns col(4k) to col(4k + 3); kV == 4).
  void add4(int k, const detail::F4& x) {
#pragma unroll
    for (int c = 0; c < 4; c++) s_[4 * k + c] += x.v[c];
  }
#endif
  // Writes the sums into element row 0 of `out` (width W, `rows` element rows; the rest are 0).
  void write(float* out, int rows, abi::Loc l) const {
    KILN_TILE_RT(compute_only)("ColSums store", l);
#ifdef KILN_TILE_CUDA
    cuda::compute_begin(true);  // every warp is done reading the block
    for (int e = cuda::role_rank(); e < (rows - 1) * W; e += cuda::role_size()) out[W + e] = 0.0f;
    for (int g = 0; g < kP; g++) {  // the row groups in turn: the first writes, the others add
      if (cuda::warp() % kP == g)
#pragma unroll
        for (int k = 0; k < kChunks * kV; k++) out[col(k)] = g == 0 ? s_[k] : out[col(k)] + s_[k];
      cuda::role_sync();
    }
    cuda::compute_end(false);
#else
    for (int j = 0; j < W; j++) out[j] = s_[j];
    for (int e = W; e < rows * W; e++) out[e] = 0.0f;
#endif
  }
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

// ---- blocks and circular buffers ----
// Waited: taken from its CB with wait() (filled by another role, or by this one through the CB).
template <class T, int R, int C, int TH = kTile, bool Waited = false>
class Block {
 public:
  static_assert(R > 0 && C > 0, "kiln.tile: a block has at least one tile in each dimension");
  using value_type = T;
  using expr_type = Block;
  static constexpr int rows = R, cols = C, th = TH, height = R * TH, width = C * kTile;

  explicit Block(abi::BlockRef ref) : ref_(ref) {}
  abi::BlockRef ref() const { return ref_; }

  // Evaluates `e` (broadcast to this shape) and writes it here.
  template <Operand E>
  void store(const E& e, KILN_TILE_LOC) const {
    store_at(e, detail::loc(line, file));
  }
  // The same, adding column sums in the same pass (sum_into).
  template <Operand E, class S1, class E1>
  void store(const E& e, const detail::SumInto<S1, E1>& a, KILN_TILE_LOC) const {
    store_at(e, detail::loc(line, file), a);
  }
  template <Operand E, class S1, class E1, class S2, class E2>
  void store(const E& e, const detail::SumInto<S1, E1>& a, const detail::SumInto<S2, E2>& b,
             KILN_TILE_LOC) const {
    store_at(e, detail::loc(line, file), a, b);
  }
  // Column sums (ColSums) into element row 0 of this (1, N) f32 block, the rest of it 0.
  template <int SH>
  void store(const ColSums<SH, width>& s, KILN_TILE_LOC) const {
    static_assert(sizeof(T) == 4, "kiln.tile: column sums are stored into f32 blocks");
    abi::Loc l = detail::loc(line, file);
    s.write(reinterpret_cast<float*>(data(1, l)), height, l);
  }
  // acc += a @ b with f32 accumulation (bf16 blocks round once per call).
  template <class A, class B>
  void operator+=(const detail::Matmul<A, B>& m) const {
    static_assert(detail::Matmul<A, B>::rows == R && detail::Matmul<A, B>::cols == C,
                  "kiln.tile: acc += matmul(a, b) needs acc of shape (M, N) for a (M, K) and b (K, N)");
    auto bound = m.bind(m.where);
    matmul_rows(bound, data(1, m.where), true);
  }
  // Binds this block for reading inside an expression (checks it is readable now).
  detail::BoundBlock<T, R, C, TH, Waited> bind(abi::Loc l) const { return {data(0, l)}; }

 private:
  template <Operand E, class... Sums>
  void store_at(const E& e, abi::Loc l, const Sums&... sums) const {
    auto ex = detail::as_expr(e);
    using X = decltype(ex);
    static_assert(detail::dims_match(X::rows, R) && detail::dims_match(X::cols, C),
                  "kiln.tile: store of an expression whose shape (in tiles) differs from the block's");
    static_assert(detail::dims_match(X::th, TH),
                  "kiln.tile: store of an expression whose tiles have another height than the block's");
    static_assert(sizeof...(Sums) == 0 || !detail::IsMatmul<X>::value, "kiln.tile: sum_into with a matmul");
#ifdef KILN_TILE_CUDA
    constexpr int warps = KILN_TILE_COMPUTE_WARPS;
    constexpr bool rows = detail::row_local(height, width, warps);
    // the sums join the store's pass where its threads take the elements they sum
    constexpr bool joined = sizeof...(Sums) > 0 && rows && width % 128 == 0 &&
                            ((Sums::sums_type::kJoinsStores && Sums::sums_type::height == height &&
                              Sums::sums_type::width == width) &&
                             ...);
#else
    constexpr bool joined = false;
#endif
    if constexpr (!joined) (sums.sums->add_at(sums.e, l), ...);
    auto bound = ex.bind(l);
    T* out = data(1, l);
    if constexpr (detail::IsMatmul<X>::value) {
      matmul_rows(bound, out, false);
    } else {
#ifdef KILN_TILE_CUDA
      if constexpr (joined) {
        KILN_TILE_RT(compute_only)("ColSums::add", l);
        store_joined(bound, out, sums.bind(l)...);
        return;
      }
      // a barrier before: where it reads what other warps wrote, or writes a block every warp may
      // have read anywhere; one after (at the next store): where other warps may still read what
      // it overwrites next
      constexpr bool crosses = decltype(bound)::crosses(detail::kAtElement, rows, warps);
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
        cuda::for_elements<height, width>(out,
                                          [&](int i, int j) { return detail::from_f32<T>(bound.at(i, j)); });
      cuda::compute_end(crosses || Waited);
#else
      for (int i = 0; i < height; i++)
        for (int j = 0; j < width; j++) out[i * width + j] = detail::from_f32<T>(bound.at(i, j));
#endif
    }
  }
#ifdef KILN_TILE_CUDA
  // A row-local store whose pass also adds column sums (bound SumInto terms): each thread evaluates
  // its elements of the sums' expressions beside the stored one's, so shared operands are read once.
  template <class B, class... Sums>
  void store_joined(const B& bound, T* out, const Sums&... sums) const {
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
#endif
  T* data(int write, abi::Loc l) const { return static_cast<T*>(KILN_TILE_RT(block_data)(ref_, write, l)); }
  // out row i = (accumulate ? out row i : 0) + sum_k a(i, k) * b(k, :), one f32 row at a time
  template <class M>
  static void matmul_rows(const M& m, T* out, bool accumulate) {
    constexpr int K = decltype(m.a)::cols * kTile;
#ifdef KILN_TILE_CUDA
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
#else
    float row[width];
    for (int i = 0; i < height; i++) {
      for (int j = 0; j < width; j++) row[j] = accumulate ? detail::to_f32(out[i * width + j]) : 0.0f;
      for (int k = 0; k < K; k++) {
        float aik = m.a.at(i, k);
        for (int j = 0; j < width; j++) row[j] += aik * m.b.at(k, j);
      }
      for (int j = 0; j < width; j++) out[i * width + j] = detail::from_f32<T>(row[j]);
    }
#endif
  }
  abi::BlockRef ref_;
};

// A block that pushes (producer) or pops (consumer) when it goes out of scope.
template <class CBT, bool Producer>
class ScopedBlock : public Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th, !Producer> {
 public:
  ScopedBlock(abi::BlockRef ref, abi::Loc l)
      : Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th, !Producer>(ref),
        loc_(detail::scope_end(l)) {}
  ScopedBlock(const ScopedBlock&) = delete;
  ScopedBlock& operator=(const ScopedBlock&) = delete;
  ~ScopedBlock() {
    if (Producer)
      KILN_TILE_RT(cb_push)(CBT::id, loc_);
    else
      KILN_TILE_RT(cb_pop)(CBT::id, loc_);
  }

 private:
  abi::Loc loc_;
};

// A block one role fills and reads itself (intermediate values of a compute, e.g. an f32 copy of
// a centered row): reserved on construction, pushed and taken back (wait + pop) on destruction, so
// the CB protocol holds with no other role involved. Built on the plain CB ops only.
template <class CBT>
class ScratchBlock : public Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th> {
 public:
  ScratchBlock(abi::BlockRef ref, abi::Loc l)
      : Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th>(ref), loc_(detail::scope_end(l)) {}
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  ~ScratchBlock() {
    KILN_TILE_RT(cb_push)(CBT::id, loc_);
    KILN_TILE_RT(cb_wait)(CBT::id, loc_);
    KILN_TILE_RT(cb_pop)(CBT::id, loc_);
  }

 private:
  abi::Loc loc_;
};

// A circular buffer of blocks of R x C tiles of T, tiles of TH x 32 elements (ring depth = the
// host's buffer factor); Id is its index in the program (a constant, so the runtime's CB
// bookkeeping folds into the kernel).
template <class T, int R, int C, int Id, int TH = kTile>
struct CB {
  using value_type = T;
  using block_type = Block<T, R, C, TH>;
  using waited_type = Block<T, R, C, TH, true>;
  static constexpr int rows = R, cols = C, id = Id, th = TH;

  block_type reserve(KILN_TILE_LOC) const {
    return block_type(KILN_TILE_RT(cb_reserve)(id, detail::loc(line, file)));
  }
  void push(KILN_TILE_LOC) const { KILN_TILE_RT(cb_push)(id, detail::loc(line, file)); }
  waited_type wait(KILN_TILE_LOC) const {
    return waited_type(KILN_TILE_RT(cb_wait)(id, detail::loc(line, file)));
  }
  void pop(KILN_TILE_LOC) const { KILN_TILE_RT(cb_pop)(id, detail::loc(line, file)); }
  ScopedBlock<CB, true> scoped_reserve(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScopedBlock<CB, true>(KILN_TILE_RT(cb_reserve)(id, l), l);
  }
  ScopedBlock<CB, false> scoped_wait(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScopedBlock<CB, false>(KILN_TILE_RT(cb_wait)(id, l), l);
  }
  // A compute-local block (see ScratchBlock); the CB needs no other user.
  ScratchBlock<CB> scoped_scratch(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScratchBlock<CB>(KILN_TILE_RT(cb_reserve)(id, l), l);
  }
};

// ---- tensors and data movement ----
template <class T>
struct TensorSlice {
  int tensor;
  abi::Slice s;
};

// A bound tensor seen as 2D (rows, cols); slices count in tiles or elements (the host decides). Id:
// its index in the program.
template <class T, Indexing I, int Id>
struct Accessor {
  static constexpr int id = Id;
  // rows [row, row + rows) x cols [col, col + cols), in the accessor's units
  TensorSlice<T> slice(long long row, long long col, long long rows = 1, long long cols = 1) const {
    return TensorSlice<T>{id, abi::Slice{row, col, rows, cols}};
  }
  TensorSlice<T> operator()(long long row, long long col) const { return slice(row, col); }
  long long rows() const {
    long long r, c;
    KILN_TILE_RT(tensor_dims)(id, &r, &c);
    return r;
  }
  long long cols() const {
    long long r, c;
    KILN_TILE_RT(tensor_dims)(id, &r, &c);
    return c;
  }
};

// An asynchronous copy; the blocks it touches may not be used until wait() returns.
struct Transfer {
  int id;
  void wait(KILN_TILE_LOC) const { KILN_TILE_RT(transfer_wait)(id, detail::loc(line, file)); }
};

// tensor slice -> block; the slice must have the block's shape in tiles (tile accessors) or fit in
// it (element accessors); elements outside the tensor or the slice read as `pad`.
template <class T, int R, int C, int TH, bool W>
Transfer dma(const TensorSlice<T>& src, const Block<T, R, C, TH, W>& dst, float pad, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_read)(src.tensor, src.s, dst.ref(), pad, detail::loc(line, file))};
}
template <class T, int R, int C, int TH, bool W>
Transfer dma(const TensorSlice<T>& src, const Block<T, R, C, TH, W>& dst, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_read)(src.tensor, src.s, dst.ref(), 0.0f, detail::loc(line, file))};
}
// block -> tensor slice; only the part of the slice inside the tensor is written.
template <class T, int R, int C, int TH, bool W>
Transfer dma(const Block<T, R, C, TH, W>& src, const TensorSlice<T>& dst, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_write)(src.ref(), dst.tensor, dst.s, detail::loc(line, file))};
}

// ---- cross-core (2D grids only) ----
// Copies `src` into the block each core of `range` (this core excluded) reserved in `dst` and
// handed to mcast_receive(); waits until every receiver is ready.
template <class T, int R, int C, int TH, int Id, bool W>
Transfer mcast(const Block<T, R, C, TH, W>& src, const CB<T, R, C, Id, TH>& dst, CoreRange range,
               KILN_TILE_LOC) {
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on a "
                "plain core count without topology");
  return Transfer{KILN_TILE_RT(mcast)(src.ref(), dst.id, range, detail::loc(line, file))};
}
// Marks a reserved block as the destination of a multicast; wait() returns when it arrived.
template <class T, int R, int C, int TH, bool W>
Transfer mcast_receive(const Block<T, R, C, TH, W>& dst, KILN_TILE_LOC) {
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on a "
                "plain core count without topology");
  return Transfer{KILN_TILE_RT(mcast_receive)(dst.ref(), detail::loc(line, file))};
}

// A per-core counter; remote_inc and mcast_set reach other cores of a 2D grid. Id: its index in
// the program.
template <int Id>
struct Semaphore {
  static constexpr int id = Id;
  void set(long long v, KILN_TILE_LOC) const { KILN_TILE_RT(sem_set)(id, v, detail::loc(line, file)); }
  void inc(long long n = 1, KILN_TILE_LOC) const { KILN_TILE_RT(sem_inc)(id, n, detail::loc(line, file)); }
  // Blocks until this core's value is at least v.
  void wait(long long v, KILN_TILE_LOC) const { KILN_TILE_RT(sem_wait)(id, v, detail::loc(line, file)); }
  long long value(KILN_TILE_LOC) const { return KILN_TILE_RT(sem_value)(id, detail::loc(line, file)); }
  template <class T = void>
  void remote_inc(int x, int y, long long n = 1, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>, "kiln.tile: remote semaphore ops need a 2D grid (Grid::grid2d)");
    KILN_TILE_RT(sem_remote_inc)(id, x, y, n, detail::loc(line, file));
  }
  template <class T = void>
  void mcast_set(CoreRange range, long long v, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>,
                  "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on "
                  "a plain core count without topology");
    KILN_TILE_RT(sem_mcast_set)(id, range, v, detail::loc(line, file));
  }
  // Adds n to the value on every core of the range (this one included, where it lies inside): a
  // barrier in one step, each core adding to all and waiting for its own value to reach the count.
  template <class T = void>
  void mcast_inc(CoreRange range, long long n = 1, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>,
                  "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on "
                  "a plain core count without topology");
    KILN_TILE_RT(sem_mcast_inc)(id, range, n, detail::loc(line, file));
  }
};

}  // namespace kiln::tile

#undef KILN_TILE_LOC
#undef KILN_TILE_RT
#undef KILN_TILE_HAVE_LOC
