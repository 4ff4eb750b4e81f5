// A block of a CB: stores of expressions into it, matmul accumulation, reads inside expressions.
// What a store does on each backend is cpu_eval.h / cuda_eval.h. Part of kernel.h, which defines the
// macros it uses (KILN_TILE_RT, KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_col_sums.h"

namespace kiln::tile {

// ---- blocks ----
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
    detail::matmul_rows<height, width>(bound, data(1, m.where), true);
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
    constexpr bool joined = detail::joins_store<height, width, Sums...>();
    if constexpr (!joined) (sums.sums->add_at(sums.e, l), ...);
    auto bound = ex.bind(l);
    T* out = data(1, l);
    if constexpr (detail::IsMatmul<X>::value) {
      detail::matmul_rows<height, width>(bound, out, false);
    } else if constexpr (joined) {
      KILN_TILE_RT(compute_only)("ColSums::add", l);
      detail::store_joined<height, width, Waited>(bound, out, sums.bind(l)...);
    } else {
      detail::store_elements<height, width, Waited>(bound, out);
    }
  }
  T* data(int write, abi::Loc l) const { return static_cast<T*>(KILN_TILE_RT(block_data)(ref_, write, l)); }
  abi::BlockRef ref_;
};

}  // namespace kiln::tile
