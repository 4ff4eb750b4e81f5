// Composite math ops (src/frontend/math.cpp): each against the reference interpreter over shapes,
// layouts and dtypes, against the host's <cmath> as the PyTorch value, special values and accuracy.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln {
namespace {

using testing::default_tol;
using testing::expect_matches_reference;
using testing::expect_values;
using testing::random_tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Fn1 = std::function<Tensor(const Tensor&)>;
using Host1 = std::function<double(double)>;

double gelu_h(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh_h(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double softplus_h(double x, double beta = 1, double th = 20) {
  return x * beta > th ? x : std::log1p(std::exp(x * beta)) / beta;
}
double logsigmoid_h(double x) { return std::min(x, 0.0) - std::log1p(std::exp(-std::fabs(x))); }
double sign_h(double x) { return (x > 0) - (x < 0); }
double round_h(double x) { return std::nearbyint(x); }  // default rounding mode: half to even
double elu_h(double x, double a = 1) { return x > 0 ? x : a * std::expm1(x); }
double selu_h(double x) {
  return 1.0507009873554804934193349852946 * elu_h(x, 1.6732632423543772848170429916717);
}

struct UnaryCase {
  std::string name;
  Fn1 fn;
  Host1 host;
  double lo, hi;
  bool ints = false;  // also run on i32 input (returns float for float ops)
};

std::vector<UnaryCase> make_unary_cases() {
  return {
      {"log1p", [](auto& x) { return x.log1p(); }, [](double v) { return std::log1p(v); }, -0.99, 5, true},
      {"expm1", [](auto& x) { return x.expm1(); }, [](double v) { return std::expm1(v); }, -5, 5, true},
      {"erf", [](auto& x) { return x.erf(); }, [](double v) { return std::erf(v); }, -4, 4, true},
      {"floor", [](auto& x) { return x.floor(); }, [](double v) { return std::floor(v); }, -5, 5, true},
      {"ceil", [](auto& x) { return x.ceil(); }, [](double v) { return std::ceil(v); }, -5, 5, true},
      {"round", [](auto& x) { return x.round(); }, round_h, -5, 5, true},
      {"round_halves", [](auto& x) { return ((x * 2.0).round() * 0.5).round(); },  // exact .5 ties
       [](double v) { return std::nearbyint(std::nearbyint(v * 2) * 0.5); }, -5, 5},
      {"sign", [](auto& x) { return x.sign(); }, sign_h, -5, 5, true},
      {"square", [](auto& x) { return x.square(); }, [](double v) { return v * v; }, -5, 5, true},
      {"clamp", [](auto& x) { return x.clamp(-1.5, 2.0); }, [](double v) { return std::clamp(v, -1.5, 2.0); },
       -5, 5, true},
      {"clamp_min", [](auto& x) { return x.clamp(0.5); }, [](double v) { return std::max(v, 0.5); }, -5, 5},
      {"clamp_max", [](auto& x) { return x.clamp(std::nullopt, 1.0); },
       [](double v) { return std::min(v, 1.0); }, -5, 5, true},
      {"tan", [](auto& x) { return x.tan(); }, [](double v) { return std::tan(v); }, -1.5, 1.5, true},
      {"asin", [](auto& x) { return x.asin(); }, [](double v) { return std::asin(v); }, -1, 1},
      {"acos", [](auto& x) { return x.acos(); }, [](double v) { return std::acos(v); }, -1, 1},
      {"atan", [](auto& x) { return x.atan(); }, [](double v) { return std::atan(v); }, -20, 20, true},
      {"sinh", [](auto& x) { return x.sinh(); }, [](double v) { return std::sinh(v); }, -5, 5, true},
      {"cosh", [](auto& x) { return x.cosh(); }, [](double v) { return std::cosh(v); }, -5, 5, true},
      {"asinh", [](auto& x) { return x.asinh(); }, [](double v) { return std::asinh(v); }, -20, 20, true},
      {"acosh", [](auto& x) { return x.acosh(); }, [](double v) { return std::acosh(v); }, 1, 20, true},
      {"atanh", [](auto& x) { return x.atanh(); }, [](double v) { return std::atanh(v); }, -0.99, 0.99},
      {"softplus", [](auto& x) { return x.softplus(); }, [](double v) { return softplus_h(v); }, -30, 30,
       true},
      {"softplus_beta", [](auto& x) { return x.softplus(2, 5); },
       [](double v) { return softplus_h(v, 2, 5); }, -10, 10},
      {"silu", [](auto& x) { return x.silu(); }, [](double v) { return v / (1 + std::exp(-v)); }, -8, 8,
       true},
      {"gelu", [](auto& x) { return x.gelu(); }, gelu_h, -8, 8, true},
      {"gelu_tanh", [](auto& x) { return x.gelu(true); }, gelu_tanh_h, -8, 8},
      {"elu", [](auto& x) { return x.elu(0.7); }, [](double v) { return elu_h(v, 0.7); }, -5, 5, true},
      {"selu", [](auto& x) { return x.selu(); }, selu_h, -5, 5},
      {"leaky_relu", [](auto& x) { return x.leaky_relu(0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; },
       -5, 5, true},
      {"hardtanh", [](auto& x) { return x.hardtanh(-0.5, 2); },
       [](double v) { return std::clamp(v, -0.5, 2.0); }, -5, 5},
      {"relu6", [](auto& x) { return x.relu6(); }, [](double v) { return std::clamp(v, 0.0, 6.0); }, -3, 9,
       true},
      {"logsigmoid", [](auto& x) { return x.logsigmoid(); }, logsigmoid_h, -30, 30},
      {"mish", [](auto& x) { return x.mish(); }, [](double v) { return v * std::tanh(softplus_h(v)); }, -8,
       8},
  };
}

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> c = make_unary_cases();
  return c;
}

// A non-contiguous view of `s`: built reversed and permuted back, or strided.
Tensor input_of(const Shape& s, DType t, double lo, double hi, uint64_t seed, int layout) {
  if (layout == 0 || s.empty() || s[0] == 0) return random_tensor(s, t, lo, hi, seed);
  if (layout == 1) {
    Shape r(s.rbegin(), s.rend());
    std::vector<int64_t> perm;
    for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; i--) perm.push_back(i);
    return random_tensor(r, t, lo, hi, seed).permute(perm);
  }
  Shape b = s;
  b[0] = 2 * s[0];
  return random_tensor(b, t, lo, hi, seed).slice(0, 0, std::nullopt, 2);
}

class MathUnary : public ::testing::TestWithParam<size_t> {};

TEST_P(MathUnary, MatchesReferenceAndHost) {
  const UnaryCase& c = unary_cases()[GetParam()];
  const std::vector<Shape> shapes = {{}, {1}, {7}, {0, 3}, {3, 5}, {17, 33}};
  std::vector<DType> dts = {DType::F32, DType::F64, DType::F16, DType::BF16};
  if (c.ints) dts.push_back(DType::I32);
  uint64_t seed = std::hash<std::string>{}(c.name);
  for (DType dt : dts)
    for (size_t si = 0; si < shapes.size(); si++)
      for (int layout = 0; layout < 3; layout++) {
        if (layout && shapes[si].size() < 2) continue;
        SCOPED_TRACE(c.name + " " + dtype_name(dt) + " " + shape_str(shapes[si]) + " layout " +
                     std::to_string(layout));
        Tensor x =
            input_of(shapes[si], dt, c.lo, c.hi, seed + si * 31 + static_cast<uint64_t>(layout), layout);
        Tensor y = c.fn(x);
        auto g = y.node();
        auto tol = default_tol(y.dtype(), true);
        if (!expect_matches_reference(y, g, tol.rtol, tol.atol * 10)) continue;
        if (dt == DType::F32 || dt == DType::F64) {
          auto xv = x.to_vector<double>();
          std::vector<double> want;
          for (double v : xv) want.push_back(c.host(v));
          // mish: Tensor::tanh is only ~5e-12 accurate in f64 near |x| = 0.0625 (its Taylor branch)
          double rtol = dt == DType::F64 ? (c.name == "mish" ? 1e-10 : 1e-12) : 2e-6,
                 atol = dt == DType::F64 ? 1e-13 : 2e-6;
          SCOPED_TRACE("host <cmath> oracle");
          expect_values(y, want, rtol, atol);
        }
      }
}

std::string unary_name(const ::testing::TestParamInfo<size_t>& info) {
  return unary_cases()[info.param].name;
}
INSTANTIATE_TEST_SUITE_P(MathOps, MathUnary, ::testing::Range<size_t>(0, unary_cases().size()), unary_name);

// Binary ops: broadcasting and non-contiguous inputs.
TEST(MathOps, Atan2) {
  Tensor y = random_tensor({4, 5}, DType::F32, -3, 3, 1), x = random_tensor({4, 5}, DType::F32, -3, 3, 2);
  Tensor r = y.atan2(x);
  expect_matches_reference(r, r.node(), 1e-4, 1e-5);
  auto yv = y.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < yv.size(); i++) want.push_back(std::atan2(yv[i], xv[i]));
  expect_values(r, want, 2e-6, 2e-6);
  // broadcasting, transposed, f64
  Tensor yb = random_tensor({5}, DType::F64, -2, 2, 3), xb = random_tensor({5, 4}, DType::F64, -2, 2, 4).t();
  Tensor rb = yb.atan2(xb);
  expect_matches_reference(rb, rb.node(), 1e-9, 1e-9);
  auto ybv = yb.to_vector<double>(), xbv = xb.contiguous().to_vector<double>();
  std::vector<double> wb;
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 5; j++) wb.push_back(std::atan2(ybv[j], xbv[i * 5 + j]));
  expect_values(rb, wb, 1e-12, 1e-13);
  // quadrants, zeros (signed), infinities, NaN
  std::vector<double> ys = {0.0, -0.0, 0.0, -0.0, 1, -1, kInf, kInf, -kInf, 1, kNaN, 2};
  std::vector<double> xs = {0.0, 0.0, -0.0, -0.0, -kInf, kInf, kInf, -kInf, 3, 0.0, 1, kNaN};
  Tensor ty = tensor(ys).to(DType::F32), tx = tensor(xs).to(DType::F32);
  std::vector<double> ws;
  for (size_t i = 0; i < ys.size(); i++) ws.push_back(std::atan2(ys[i], xs[i]));
  expect_values(ty.atan2(tx), ws, 2e-6, 1e-7);
  // half types and ints
  Tensor h = random_tensor({6}, DType::F16, -2, 2, 5);
  Tensor rh = h.atan2(random_tensor({6}, DType::F16, -2, 2, 6));
  EXPECT_EQ(rh.dtype(), DType::F16);
  expect_matches_reference(rh, rh.node(), 5e-3, 1e-3);
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).atan2(tensor(std::vector<int32_t>{1, 0})).dtype(), DType::F32);
}

TEST(MathOps, ClampTensorsAndLerp) {
  Tensor x = random_tensor({3, 5}, DType::F32, -5, 5, 7);
  Tensor lo = random_tensor({5}, DType::F32, -2, 0, 8), hi = random_tensor({3, 1}, DType::F32, 0, 2, 9);
  Tensor c = x.clamp(lo, hi);
  expect_matches_reference(c, c.node(), 0, 0);
  auto xv = x.to_vector<double>(), lv = lo.to_vector<double>(), hv = hi.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < 3; i++)
    for (size_t j = 0; j < 5; j++) want.push_back(std::min(std::max(xv[i * 5 + j], lv[j]), hv[i]));
  expect_values(c, want);
  // lerp: tensor weight broadcast and scalar weight, non-contiguous end
  Tensor end = random_tensor({5, 3}, DType::F32, -5, 5, 10).t();
  Tensor w = random_tensor({5}, DType::F32, -0.5, 1.5, 11);
  Tensor l = x.lerp(end, w), l2 = x.lerp(end, 0.75);
  expect_matches_reference(l, l.node(), 2e-5, 1e-5);
  expect_matches_reference(l2, l2.node(), 2e-5, 1e-5);
  auto ev = end.contiguous().to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> wl, wl2;
  for (size_t i = 0; i < 3; i++)
    for (size_t j = 0; j < 5; j++) {
      double a = xv[i * 5 + j], b = ev[i * 5 + j];
      wl.push_back(a + wv[j] * (b - a));
      wl2.push_back(a + 0.75 * (b - a));
    }
  expect_values(l, wl, 1e-5, 1e-5);
  expect_values(l2, wl2, 1e-5, 1e-5);
  expect_values(tensor({1.0f, 2.0f}).lerp(tensor({3.0f, 7.0f}), 1.0), {3, 7});  // exact at w = 1
  // integer clamp stays integer; a float bound makes it float
  Tensor xi = tensor(std::vector<int32_t>{-4, 0, 9});
  EXPECT_EQ(xi.clamp(-1, 3).dtype(), DType::I32);
  expect_values(xi.clamp(-1, 3), {-1, 0, 3});
  EXPECT_EQ(xi.clamp(0.5).dtype(), DType::F32);
  // min > max gives max everywhere; NaN stays NaN
  expect_values(tensor({1.0f, NAN, -3.0f}).clamp(2.0, 1.0), {1, kNaN, 1});
}

TEST(MathOps, MaskedFill) {
  Tensor x = random_tensor({3, 4}, DType::F32, -1, 1, 12);
  Tensor m = random_tensor({4}, DType::Bool, 0, 1, 13);
  Tensor r = x.masked_fill(m, -kInf);
  expect_matches_reference(r, r.node(), 0, 0);
  auto xv = x.to_vector<double>();
  auto mv = m.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < 12; i++) want.push_back(mv[i % 4] ? -kInf : xv[i]);
  expect_values(r, want);
  Tensor xi = tensor(std::vector<int64_t>{1, 2, 3});
  Tensor ri = xi.masked_fill((tensor(std::vector<int32_t>{1, 0, 1}) != 0), 7);
  EXPECT_EQ(ri.dtype(), DType::I64);
  expect_values(ri, {7, 2, 7});
}

// PyTorch's values at special inputs
TEST(MathOps, SpecialValues) {
  auto f = [](std::vector<float> v) { return tensor(std::vector<float>(v)); };
  Tensor s = f({0.0f, -0.0f, INFINITY, -INFINITY, NAN});
  expect_values(s.log1p(), {0, 0, kInf, kNaN, kNaN});
  expect_values(f({-1.0f, -2.0f}).log1p(), {-kInf, kNaN});
  expect_values(s.expm1(), {0, 0, kInf, -1, kNaN});
  expect_values(s.erf(), {0, 0, 1, -1, kNaN});
  expect_values(s.floor(), {0, 0, kInf, -kInf, kNaN});
  expect_values(s.round(), {0, 0, kInf, -kInf, kNaN});
  expect_values(s.sign(), {0, 0, 1, -1, 0});  // as PyTorch's CPU kernel: sign(NaN) = 0
  expect_values(s.atan(), {0, 0, M_PI / 2, -M_PI / 2, kNaN}, 1e-7);
  expect_values(s.sinh(), {0, 0, kInf, -kInf, kNaN});
  expect_values(s.cosh(), {1, 1, kInf, kInf, kNaN});
  expect_values(s.asinh(), {0, 0, kInf, -kInf, kNaN});
  expect_values(s.tanh(), {0, 0, 1, -1, kNaN});
  expect_values(s.softplus(), {std::log(2.0), std::log(2.0), kInf, 0, kNaN}, 1e-6);
  expect_values(s.logsigmoid(), {-std::log(2.0), -std::log(2.0), 0, -kInf, kNaN}, 1e-6);
  expect_values(s.silu(), {0, 0, kInf, kNaN, kNaN});  // -inf * sigmoid(-inf) = -inf * 0
  expect_values(s.gelu(), {0, 0, kInf, kNaN, kNaN});
  expect_values(s.elu(), {0, 0, kInf, -1, kNaN});
  expect_values(s.clamp(-1.0, 1.0), {0, 0, 1, -1, kNaN});
  expect_values(f({1.0f, -1.0f, 1.5f}).atanh(), {kInf, -kInf, kNaN});
  expect_values(f({1.0f, 0.5f}).acosh(), {0, std::acosh(0.5)});
  expect_values(f({1.0f, -1.0f, 1.5f}).asin(), {M_PI / 2, -M_PI / 2, kNaN}, 1e-7);
  expect_values(f({1.0f, -1.0f, 1.5f}).acos(), {0, M_PI, kNaN}, 1e-7, 1e-7);
  // round half to even, large values, near-half values
  expect_values(f({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 8388609.0f, 1e30f}).round(),
                {0, 2, 2, -0, -2, -2, 0, 8388609, static_cast<float>(1e30)});
  expect_values(tensor(std::vector<double>{0.5, 2.5, 4503599627370497.0}).round(),
                {0, 2, 4503599627370497.0});
  expect_values(f({-0.5f, -1.0f, 2.7f}).floor(), {-1, -1, 2});
  expect_values(f({-0.5f, -1.0f, 2.2f}).ceil(), {-0.0, -1, 3});
}

TEST(MathOps, ExtremeMagnitudes) {
  // tiny arguments keep relative precision, huge ones do not overflow early
  Tensor t = tensor({1e-30f, -1e-20f, 1e-10f, 3e-8f, 1e-5f});
  auto tv = t.to_vector<double>();
  auto host = [&](double (*f)(double)) {
    std::vector<double> w;
    for (double v : tv) w.push_back(f(v));
    return w;
  };
  expect_values(t.log1p(), host(std::log1p), 1e-6);
  expect_values(t.expm1(), host(std::expm1), 1e-6);
  expect_values(t.erf(), host(std::erf), 1e-6);
  expect_values(t.atan(), host(std::atan), 1e-6);
  expect_values(t.asin(), host(std::asin), 1e-6);
  expect_values(t.sinh(), host(std::sinh), 1e-6);
  expect_values(t.asinh(), host(std::asinh), 1e-6);
  expect_values(t.atanh(), host(std::atanh), 1e-6);
  expect_values(t.tan(), host(std::tan), 1e-6);
  Tensor big = tensor({50.0f, 88.0f, -88.0f, 1e20f, -1e30f, 3e38f});
  auto bv = big.to_vector<double>();
  auto hostb = [&](double (*f)(double)) {
    std::vector<double> w;
    for (double v : bv) w.push_back(static_cast<float>(f(v)));
    return w;
  };
  expect_values(big.sinh(), hostb(std::sinh), 1e-5);
  expect_values(big.cosh(), hostb(std::cosh), 1e-5);
  expect_values(big.asinh(), hostb(std::asinh), 1e-6);
  expect_values(big.atan(), hostb(std::atan), 1e-6);
  expect_values(big.erf(), hostb(std::erf), 1e-6);
  expect_values(big.softplus(), {50, 88, softplus_h(-88), 1e20, 0, 3e38}, 1e-5);
  expect_values(big.logsigmoid(), hostb(logsigmoid_h), 1e-5);
  expect_values(big.gelu(), {50, 88, 0, 1e20, -0.0, 3e38}, 1e-6);
  expect_values(tensor({1e20f, 3e38f}).acosh(), {std::acosh(1e20), std::acosh(3e38)}, 1e-6);
  // gelu's negative tail keeps relative precision (1 + erf(z) computed as erfc(-z))
  Tensor tail = tensor({-5.0f, -8.0f, -12.0f});
  expect_values(tail.gelu(), {gelu_h(-5), gelu_h(-8), gelu_h(-12)}, 1e-5);
}

// Measured accuracy over dense grids against <cmath> in double: max of |err| / max(|want|, 1).
// (f32 exp() has relative error ~|x| 2^-24 from rounding x*log2(e), which bounds sinh/cosh/logsigmoid.)
TEST(MathOps, Accuracy) {
  struct Acc {
    const char* name;
    Fn1 fn;
    Host1 host;
    double lo, hi, bound_f32, bound_f64;
  };
  std::vector<Acc> acc = {
      {"erf", [](auto& x) { return x.erf(); }, [](double v) { return std::erf(v); }, -6, 6, 1e-6, 1e-14},
      {"log1p", [](auto& x) { return x.log1p(); }, [](double v) { return std::log1p(v); }, -0.999, 10, 1e-6,
       1e-14},
      {"expm1", [](auto& x) { return x.expm1(); }, [](double v) { return std::expm1(v); }, -10, 10, 1e-6,
       1e-14},
      {"atan", [](auto& x) { return x.atan(); }, [](double v) { return std::atan(v); }, -100, 100, 1e-6,
       1e-14},
      {"asin", [](auto& x) { return x.asin(); }, [](double v) { return std::asin(v); }, -1, 1, 1e-6, 1e-14},
      {"acos", [](auto& x) { return x.acos(); }, [](double v) { return std::acos(v); }, -1, 1, 1e-6, 1e-14},
      {"sinh", [](auto& x) { return x.sinh(); }, [](double v) { return std::sinh(v); }, -20, 20, 2e-6, 1e-14},
      {"cosh", [](auto& x) { return x.cosh(); }, [](double v) { return std::cosh(v); }, -20, 20, 2e-6, 1e-14},
      {"asinh", [](auto& x) { return x.asinh(); }, [](double v) { return std::asinh(v); }, -1e3, 1e3, 1e-6,
       1e-14},
      {"acosh", [](auto& x) { return x.acosh(); }, [](double v) { return std::acosh(v); }, 1, 1e3, 1e-6,
       1e-14},
      {"atanh", [](auto& x) { return x.atanh(); }, [](double v) { return std::atanh(v); }, -0.999, 0.999,
       1e-6, 1e-14},
      {"gelu", [](auto& x) { return x.gelu(); }, gelu_h, -10, 10, 1e-6, 1e-13},
      {"logsigmoid", [](auto& x) { return x.logsigmoid(); }, logsigmoid_h, -50, 50, 1e-6, 1e-14},
  };
  const int n = 20001;
  for (auto& a : acc)
    for (DType dt : {DType::F32, DType::F64}) {
      std::vector<double> xs(n);
      for (int i = 0; i < n; i++) xs[i] = a.lo + (a.hi - a.lo) * i / (n - 1);
      Tensor x = tensor(xs).to(dt);
      auto xv = x.to_vector<double>();
      auto got = a.fn(x).to_vector<double>();
      double worst = 0, at = 0;
      for (int i = 0; i < n; i++) {
        double w = a.host(xv[i]);
        double err = std::fabs(got[i] - w) / std::max(std::fabs(w), 1.0);  // relative, absolute below 1
        if (err > worst) worst = err, at = xv[i];
      }
      double bound = dt == DType::F32 ? a.bound_f32 : a.bound_f64;
      EXPECT_LT(worst, bound) << a.name << " " << dtype_name(dt) << " worst relative error at x=" << at;
      std::printf("[ accuracy ] %-10s %s max rel err %.3g (x=%.6g)\n", a.name, dtype_name(dt), worst, at);
    }
}

TEST(MathOps, DtypesAndErrors) {
  Tensor i = tensor(std::vector<int32_t>{-3, 0, 4});
  EXPECT_EQ(i.erf().dtype(), DType::F32);
  EXPECT_EQ(i.floor().dtype(), DType::I32);
  EXPECT_EQ(i.round().dtype(), DType::I32);
  EXPECT_EQ(i.sign().dtype(), DType::I32);
  expect_values(i.sign(), {-1, 0, 1});
  EXPECT_EQ(i.square().dtype(), DType::I32);
  EXPECT_EQ(random_tensor({2}, DType::BF16, 0, 1, 1).gelu().dtype(), DType::BF16);
  EXPECT_EQ(random_tensor({2}, DType::F16, 0, 1, 1).log1p().dtype(), DType::F16);
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { i.clamp(std::nullopt, std::nullopt); }).find("kiln.clamp: at least one of min and max"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              tensor({1.0f}).hardtanh(2, 1);
            }).find("kiln.hardtanh: min_val (2.000000) must be <= max_val"),
            std::string::npos);
  EXPECT_NE(msg([&] { i.lerp(i, 0.5); }).find("kiln.lerp: needs a floating point tensor, got i32"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              tensor({1.0f, 2.0f}).masked_fill(tensor({1.0f, 0.0f}), 0);
            }).find("kiln.masked_fill: mask must be a bool tensor, got f32"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              tensor({1.0f, 2.0f}).masked_fill((tensor(std::vector<int32_t>{1, 0, 1}) != 0), 0);
            }).find("kiln.masked_fill: shapes (2,) and (3,) cannot be broadcast"),
            std::string::npos);
  EXPECT_NE(
      msg([&] { (tensor(std::vector<int32_t>{1}) != 0).floor(); }).find("kiln.floor: not supported for bool"),
      std::string::npos);
}

}  // namespace
}  // namespace kiln
