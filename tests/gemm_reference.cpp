#include "gemm_reference.h"

#include <cmath>
#include <numbers>

namespace kiln::testing {

using schedule::GemmDesc;

int64_t a_offset(const GemmDesc& d, int64_t b, int64_t m, int64_t k) {
  return b * d.stride_a + (d.trans_a ? k * d.lda + m : m * d.lda + k);
}
int64_t b_offset(const GemmDesc& d, int64_t b, int64_t k, int64_t n) {
  return b * d.stride_b + (d.trans_b ? n * d.ldb + k : k * d.ldb + n);
}
int64_t c_offset(const GemmDesc& d, int64_t b, int64_t m, int64_t n) {
  return b * d.stride_c + m * d.ldc + n;
}
int64_t aux_offset(const GemmDesc& d, int64_t m, int64_t n) { return m * d.ld_aux + n; }
int64_t a_extent(const GemmDesc& d) { return a_offset(d, d.batch - 1, d.m - 1, d.k - 1) + 1; }
int64_t b_extent(const GemmDesc& d) { return b_offset(d, d.batch - 1, d.k - 1, d.n - 1) + 1; }
int64_t c_extent(const GemmDesc& d) { return c_offset(d, d.batch - 1, d.m - 1, d.n - 1) + 1; }

double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

double gelu_tanh_grad(double x) {
  double u = std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  double du = std::sqrt(2 / std::numbers::pi) * (1 + 3 * 0.044715 * x * x);
  double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}

GemmReference reference_gemm(const GemmDesc& d, const ElementReader& a, const ElementReader& b,
                             const ElementReader& bias, const ElementReader& aux) {
  using schedule::GemmEpilogue;
  GemmReference r;
  r.c.resize(static_cast<size_t>(d.batch * d.m * d.n));
  r.scale.resize(r.c.size());
  r.pre.resize(r.c.size());
  bool with_bias = d.has_bias();
  bool gelu = d.epilogue == GemmEpilogue::Gelu || d.epilogue == GemmEpilogue::BiasGelu ||
              d.epilogue == GemmEpilogue::GeluAux || d.epilogue == GemmEpilogue::BiasGeluAux;
  bool dgelu = d.epilogue == GemmEpilogue::DGelu;
  for (int64_t bt = 0; bt < d.batch; bt++)
    for (int64_t m = 0; m < d.m; m++)
      for (int64_t n = 0; n < d.n; n++) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < d.k; k++) {
          double p = a(a_offset(d, bt, m, k)) * b(b_offset(d, bt, k, n));
          s += p;
          mag += std::fabs(p);
        }
        if (with_bias) {
          s += bias(n);
          mag += std::fabs(bias(n));
        }
        size_t i = static_cast<size_t>((bt * d.m + m) * d.n + n);
        r.pre[i] = s;
        r.c[i] = gelu ? gelu_tanh(s) : dgelu ? s * gelu_tanh_grad(aux(aux_offset(d, m, n))) : s;
        r.scale[i] = dgelu ? mag * std::fabs(gelu_tanh_grad(aux(aux_offset(d, m, n)))) : mag;
      }
  return r;
}

}  // namespace kiln::testing
