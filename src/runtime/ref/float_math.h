// The f32 exp2, e^x and log2 of the C kernels (codegen/render_c.cpp's prelude: kiln_exp2f, kiln_expf,
// kiln_log2f), the same operations in the same order, so ref rounds as the CPU backend does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln::runtime::ref_device {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// 2^n for an integer n as two power-of-two factors, so subnormal results stay exact.
inline float pow2_split(float n_float, float p) {
  int32_t n = static_cast<int32_t>(n_float), n1 = n >> 1, n2 = n - n1;
  float s1 = bits_to_float(static_cast<uint32_t>(n1 + 127) << 23);
  float s2 = bits_to_float(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

inline float exp2f_kiln(float x) {
  float c = x < -151.0f ? -151.0f : (x > 129.0f ? 129.0f : x);
  float i = (c + 12582912.0f) - 12582912.0f, f = c - i;
  float p = 1.0f + f * (0.693147181f +
                        f * (0.240226507f +
                             f * (0.0555041087f +
                                  f * (0.00961812911f +
                                       f * (0.00133335581f + f * (0.000154035304f + f * 1.52527338e-05f))))));
  return x != x ? x : pow2_split(i, p);
}

inline float expf_kiln(float x) {
  float c = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p =
      1.0f +
      r * (1.0f +
           r * (0.5f + r * (0.166666672f +
                            r * (0.0416666679f +
                                 r * (0.00833333377f +
                                      r * (0.00138888892f + r * (0.000198412701f + r * 2.48015876e-05f)))))));
  return x != x ? x : pow2_split(n, p);
}

inline float log2f_kiln(float x) {
  bool sub = x < 1.17549435e-38f;
  float y = sub ? x * 8388608.0f : x;  // subnormals scaled up by 2^23
  uint32_t b;
  std::memcpy(&b, &y, 4);
  int32_t e = static_cast<int32_t>((b >> 23) & 0xff) - 127;
  float m = bits_to_float((b & 0x7fffffu) | 0x3f800000u);
  bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e += (big ? 1 : 0) - (sub ? 23 : 0);
  float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float r = s * (2.88539008f +
                 s2 * (0.961796694f +
                       s2 * (0.577078016f + s2 * (0.412198583f + s2 * (0.320598898f + s2 * 0.262309970f)))));
  r += static_cast<float>(e);
  if (x != x || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  return x == std::numeric_limits<float>::infinity() ? x : r;
}

}  // namespace kiln::runtime::ref_device
