// bf16 conversions and f32 math on the CPU (compiler builtins; the GPU's: cuda_numeric.h). Part of
// kernel.h.
#pragma once
#include "kiln/tile/kernel_base.h"

namespace kiln::tile::detail {

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

}  // namespace kiln::tile::detail
