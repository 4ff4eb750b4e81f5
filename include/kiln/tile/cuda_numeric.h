// bf16 conversions and f32 math on a GPU (hardware conversion, CUDA math; the CPU's:
// cpu_numeric.h). Part of kernel.h.
#pragma once
#include "kiln/tile/kernel_base.h"

namespace kiln::tile::detail {

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

}  // namespace kiln::tile::detail
