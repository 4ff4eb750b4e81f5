// How the CPU evaluates block expressions (kernel_eval.h's hooks): element by element, a row at a
// time. The GPU's: cuda_eval.h. Part of kernel.h.
#pragma once
#include "kiln/tile/kernel_eval.h"

namespace kiln::tile::detail {

// each element is evaluated on its own
inline constexpr bool kWarpRowReduce = false;

template <int height, int width, class... Sums>
constexpr bool joins_store() {
  return false;
}

template <int height, int width, bool Waited, class T, class B>
inline void store_elements(const B& bound, T* out) {
  for (int i = 0; i < height; i++)
    for (int j = 0; j < width; j++) out[i * width + j] = detail::from_f32<T>(bound.at(i, j));
}

// out row i = (accumulate ? out row i : 0) + sum_k a(i, k) * b(k, :), one f32 row at a time
template <int height, int width, class T, class M>
inline void matmul_rows(const M& m, T* out, bool accumulate) {
  constexpr int K = decltype(m.a)::cols * kTile;
  float row[width];
  for (int i = 0; i < height; i++) {
    for (int j = 0; j < width; j++) row[j] = accumulate ? detail::to_f32(out[i * width + j]) : 0.0f;
    for (int k = 0; k < K; k++) {
      float aik = m.a.at(i, k);
      for (int j = 0; j < width; j++) row[j] += aik * m.b.at(k, j);
    }
    for (int j = 0; j < width; j++) out[i * width + j] = detail::from_f32<T>(row[j]);
  }
}

}  // namespace kiln::tile::detail
