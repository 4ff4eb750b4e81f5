// Float64 host references of the shipped kernels (llm.c's CPU versions, in double), and the error
// metrics tests and benchmarks report against them. Shapes as in llm.c: N = B*T rows of C.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::tile::ref {

using Vec = std::vector<double>;

inline Vec values(const Tensor& t) {
  std::vector<float> f = t.to(DType::F32).to_vector<float>();
  return Vec(f.begin(), f.end());
}

// y = a * b + tanh(c), a and b M x N, c 1 x N
inline Vec mul_add_tanh(const Vec& a, const Vec& b, const Vec& c, int64_t M, int64_t N) {
  Vec y(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) y[i * N + j] = a[i * N + j] * b[i * N + j] + std::tanh(c[j]);
  return y;
}

struct LayerNormForward {
  Vec out, mean, rstd;
};
inline LayerNormForward layernorm_forward(const Vec& x, const Vec& w, const Vec& b, int64_t N, int64_t C,
                                          double eps) {
  LayerNormForward r{Vec(x.size()), Vec(N), Vec(N)};
  for (int64_t i = 0; i < N; i++) {
    const double* xi = &x[i * C];
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; j++) m += xi[j];
    m /= static_cast<double>(C);
    for (int64_t j = 0; j < C; j++) v += (xi[j] - m) * (xi[j] - m);
    double s = 1.0 / std::sqrt(v / static_cast<double>(C) + eps);
    for (int64_t j = 0; j < C; j++) r.out[i * C + j] = (xi[j] - m) * s * w[j] + b[j];
    r.mean[i] = m;
    r.rstd[i] = s;
  }
  return r;
}

struct LayerNormBackward {
  Vec dx, dweight, dbias;
};
// Gradients of one batch (no accumulation), given the forward's mean and rstd.
inline LayerNormBackward layernorm_backward(const Vec& dout, const Vec& x, const Vec& w, const Vec& mean,
                                            const Vec& rstd, int64_t N, int64_t C) {
  LayerNormBackward r{Vec(x.size()), Vec(C, 0.0), Vec(C, 0.0)};
  for (int64_t i = 0; i < N; i++) {
    const double *xi = &x[i * C], *gi = &dout[i * C];
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t j = 0; j < C; j++) {
      double norm = (xi[j] - mean[i]) * rstd[i], dnorm = w[j] * gi[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<double>(C);
    dnorm_norm_mean /= static_cast<double>(C);
    for (int64_t j = 0; j < C; j++) {
      double norm = (xi[j] - mean[i]) * rstd[i], dnorm = w[j] * gi[j];
      r.dbias[j] += gi[j];
      r.dweight[j] += norm * gi[j];
      r.dx[i * C + j] = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
    }
  }
  return r;
}

// Max absolute error, and max relative error over the elements not near zero (|want| at least 1e-3
// of the largest |want|), where a relative error means something.
struct Errors {
  double max_abs = 0, max_rel = 0;
};
inline Errors errors(const Vec& got, const Vec& want) {
  Errors e;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size() && i < want.size(); i++) {
    double d = std::fabs(got[i] - want[i]);
    e.max_abs = std::max(e.max_abs, d);
    if (std::fabs(want[i]) >= 1e-3 * scale) e.max_rel = std::max(e.max_rel, d / std::fabs(want[i]));
  }
  if (got.size() != want.size()) e.max_abs = e.max_rel = INFINITY;
  return e;
}
inline Errors errors(const Tensor& got, const Vec& want) { return errors(values(got), want); }

}  // namespace kiln::tile::ref
