// Composite math functions (log1p, erf, rounding, inverse trig, hyperbolics, activations) written from
// the primitive elementwise ops, in numerically stable forms.
#include <cmath>
#include <limits>
#include <numbers>
#include <thread>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "kiln/tensor.h"
#include "schedule/match_matmul.h"

namespace kiln {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::fail;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = std::numbers::ln2;
constexpr double kPi = std::numbers::pi;

// Transcendental math on half types is computed in f32; integer inputs give the default float.
template <class F>
Tensor fmath(const Tensor& x, F f) {
  DType out = float_result(x.dtype());
  DType calc = (out == DType::F16 || out == DType::BF16) ? DType::F32 : out;
  return f(x.to(calc)).to(out);
}

bool wide(const Tensor& x) { return x.dtype() == DType::F64; }

void need_numeric(const char* op, const Tensor& x) {
  if (x.dtype() == DType::Bool)
    fail(op, "not supported for bool tensors (shape " + shape_str(x.shape()) + ")");
}
void need_float(const char* op, const Tensor& x) {
  if (!is_float(x.dtype()))
    fail(op,
         "needs a floating point tensor, got " + to_string(x.dtype()) + " of shape " + shape_str(x.shape()));
}

// Replaces x by `safe` where `use` is false, so a branch that where() discards never sees arguments
// that would make its (discarded) value or gradient inf/NaN.
Tensor guard(const Tensor& use, const Tensor& x, double safe) { return where(use, x, safe); }

// x / (2k+1)-style odd series helpers. atan on |z| <= tan(pi/8): z - z^3/3 + z^5/5 - ...
Tensor atan_series(const Tensor& z, int terms) {
  Tensor z2 = z * z;
  Tensor p = full_like(z, (terms % 2 ? 1.0 : -1.0) / (2 * terms - 1));
  for (int k = terms - 2; k >= 0; k--) p = p * z2 + (k % 2 ? -1.0 : 1.0) / (2 * k + 1);
  return z * p;
}

// erf(x) for |x| < 2: 2/sqrt(pi) e^{-x^2} sum_n 2^n x^{2n+1} / (1*3*...*(2n+1)) (all terms positive)
Tensor erf_series(const Tensor& x, int terms) {
  Tensor x2 = x * x, s = x, t = x;
  for (int n = 1; n <= terms; n++) {
    t = t * x2 * (2.0 / (2 * n + 1));
    s = s + t;
  }
  return s * (x2 * -1.0).exp() * (2.0 / std::sqrt(kPi));
}

// erfc(x) for x >= 2: e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))) evaluated bottom-up
Tensor erfc_cf(const Tensor& x, int terms) {
  Tensor f = x;
  for (int k = terms; k >= 1; k--) f = x + (k * 0.5) / f;
  return (x * x * -1.0).exp() * (1.0 / std::sqrt(kPi)) / f;
}
int erf_terms(const Tensor& x) { return wide(x) ? 30 : 20; }
int erfc_terms(const Tensor& x) { return wide(x) ? 50 : 16; }

// erf on the computation dtype (f32/f64)
Tensor erf_impl(const Tensor& x) {
  Tensor ax = x.abs();
  Tensor small = ax < 2.0;
  Tensor s = erf_series(guard(small, x, 0), erf_terms(x));
  Tensor c = 1.0 - erfc_cf(guard(small.logical_not(), ax, 2), erfc_terms(x));
  return where(small, s, where(x < 0.0, -c, c));
}

Tensor log1p_impl(const Tensor& x) {
  // |x| < 0.5: 2 atanh(s) with s = x / (2 + x), |s| <= 1/3, as an odd series; else log(1 + x)
  Tensor small = x.abs() < 0.5;
  Tensor xs = guard(small, x, 0);
  Tensor s = xs / (xs + 2.0);
  Tensor s2 = s * s;
  int terms = wide(x) ? 17 : 8;
  Tensor p = full_like(s, 1.0 / (2 * terms - 1));
  for (int k = terms - 2; k >= 0; k--) p = p * s2 + 1.0 / (2 * k + 1);
  Tensor series = s * p * 2.0;
  Tensor big = (guard(small.logical_not(), x, 1) + 1.0).log();
  return where(small, series, big);
}

Tensor expm1_impl(const Tensor& x) {
  // |x| < 0.5: Taylor series (Horner) keeps the relative precision; else exp(x) - 1
  Tensor small = x.abs() < 0.5;
  Tensor xs = guard(small, x, 0);
  int terms = wide(x) ? 15 : 9;
  double fact = 1;
  for (int k = 2; k <= terms; k++) fact *= k;
  Tensor p = full_like(xs, 1.0 / fact);
  for (int k = terms - 1; k >= 1; k--) {
    fact /= (k + 1);
    p = p * xs + 1.0 / fact;
  }
  Tensor series = xs * p;
  return where(small, series, x.exp() - 1.0);
}

Tensor atan_impl(const Tensor& x) {
  // atan|x|: |x| > 1 -> pi/2 - atan(1/|x|); then z > tan(pi/8) -> pi/4 + atan((z-1)/(z+1))
  Tensor a = x.abs();
  Tensor inv = a > 1.0;
  Tensor z = where(inv, 1.0 / guard(inv, a, 1), a);
  Tensor mid = z > 0.41421356237309503;
  Tensor w = where(mid, (z - 1.0) / (z + 1.0), z);
  Tensor r = atan_series(w, wide(x) ? 21 : 10);
  r = where(mid, r + kPi / 4, r);
  r = where(inv, kPi / 2 - r, r);
  return where(x < 0.0, -r, r);
}

// Negative, including -0 (whose reciprocal is -inf).
Tensor is_negative(const Tensor& x) { return (x < 0.0) | ((x == 0.0) & (x.reciprocal() < 0.0)); }

Tensor atan2_impl(const Tensor& y, const Tensor& x) {
  Tensor ax = x.abs(), ay = y.abs();
  Tensor mx = maximum(ax, ay), mn = minimum(ax, ay);
  Tensor both_inf = (ax == kInf) & (ay == kInf);
  Tensor ok = (mx != 0.0) & both_inf.logical_not();
  Tensor ratio = where(both_inf, full_like(mx, 1.0), where(ok, mn / guard(ok, mx, 1), 0.0));
  Tensor r = atan_impl(ratio);
  r = where(ay > ax, kPi / 2 - r, r);
  r = where(is_negative(x), kPi - r, r);
  return where(is_negative(y), -r, r);
}

}  // namespace

Tensor Tensor::log1p() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).log1p();
  return fmath(*this, log1p_impl);
}
Tensor Tensor::expm1() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).expm1();
  return fmath(*this, expm1_impl);
}
Tensor Tensor::erf() const { return fmath(*this, erf_impl); }

Tensor Tensor::floor() const {
  need_numeric("floor", *this);
  if (!is_float(dtype())) return *this;
  return fmath(*this, [](const Tensor& x) {
    Tensor t = x.trunc();
    return where(x < t, t - 1.0, t);
  });
}
Tensor Tensor::ceil() const {
  need_numeric("ceil", *this);
  if (!is_float(dtype())) return *this;
  return fmath(*this, [](const Tensor& x) {
    Tensor t = x.trunc();
    return where(x > t, t + 1.0, t);
  });
}
Tensor Tensor::round() const {
  need_numeric("round", *this);
  if (!is_float(dtype())) return *this;
  return fmath(*this, [](const Tensor& x) {
    // x - trunc(x) is exact; a fraction of exactly 1/2 goes to the even neighbour
    Tensor t = x.trunc();
    Tensor f = (x - t).abs();
    Tensor odd = (t * 0.5).trunc() * 2.0 != t;
    Tensor away = (f > 0.5) | ((f == 0.5) & odd);
    Tensor step = where(x < 0.0, full_like(t, -1.0), full_like(t, 1.0));
    return where(away, t + step, t);
  });
}
Tensor Tensor::sign() const {
  if (dtype() == DType::Bool) return *this;
  // (x > 0) - (x < 0): 0 for 0 and NaN, as PyTorch's CPU kernel
  Tensor z = zeros_like(*this);
  Tensor pos = (*this > z).to(dtype());
  if (is_unsigned(dtype())) return pos;
  return pos - (*this < z).to(dtype());
}
Tensor Tensor::square() const {
  if (dtype() == DType::Bool) return to(DType::I64) * to(DType::I64);
  return *this * *this;
}

Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  need_numeric("clamp", *this);
  if (!min && !max) fail("clamp", "at least one of min and max must be given");
  auto is_integral = [](std::optional<double> v) { return !v || *v == std::floor(*v); };
  bool float_bound = !is_integral(min) || !is_integral(max);
  DType t = float_bound ? promote_with_scalar(dtype(), true) : dtype();
  Tensor x = to(t);
  auto bound = [&](double v) {
    return is_float(t) ? full({}, v, t) : full({}, Scalar(static_cast<long long>(v)), t);
  };
  // where, not maximum/minimum: x at a bound gets the whole gradient (PyTorch's convention); NaN
  // stays NaN; min > max gives max everywhere
  if (min) x = where(x < bound(*min), bound(*min).expand(x.shape()), x);
  if (max) x = where(x > bound(*max), bound(*max).expand(x.shape()), x);
  return x;
}
Tensor Tensor::clamp(const Tensor& min, const Tensor& max) const {
  need_numeric("clamp", *this);
  // as above; a bound gets the gradient only where it is the result alone
  Tensor x = where(*this < min, min, *this);
  return where(x > max, max, x);
}

Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const {
  need_float("lerp", *this);
  DType t = promote_types(promote_types(dtype(), end.dtype()), weight.dtype());
  if (t != dtype())
    fail("lerp", "expected start, end and weight of one dtype, got " + to_string(dtype()) + ", " +
                     to_string(end.dtype()) + " and " + to_string(weight.dtype()));
  return fmath(*this, [&](const Tensor& a) {
    Tensor b = end.to(a.dtype()), w = weight.to(a.dtype());
    Tensor d = b - a;
    // as PyTorch: start + w*d for |w| < 0.5, else end - d*(1-w) (exact at w = 1)
    return where(w.abs() < 0.5, a + w * d, b - d * (1.0 - w));
  });
}
Tensor Tensor::lerp(const Tensor& end, double weight) const {
  need_float("lerp", *this);
  return lerp(end, full({}, weight, dtype()));
}

Tensor Tensor::tan() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).tan();
  return fmath(*this, [](const Tensor& x) { return x.sin() / x.cos(); });
}
Tensor Tensor::atan() const { return fmath(*this, atan_impl); }
Tensor Tensor::asin() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).asin();
  return fmath(*this, [](const Tensor& x) { return atan2_impl(x, ((1.0 - x) * (1.0 + x)).sqrt()); });
}
Tensor Tensor::acos() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).acos();
  return fmath(*this, [](const Tensor& x) { return atan2_impl(((1.0 - x) * (1.0 + x)).sqrt(), x); });
}
Tensor Tensor::atan2(const Tensor& other) const {
  DType t = float_result(promote_types(dtype(), other.dtype()));
  return fmath(to(t), [&](const Tensor& y) { return atan2_impl(y, other.to(y.dtype())); });
}

Tensor Tensor::sinh() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).sinh();
  return fmath(*this, [](const Tensor& x) {
    // |x| < 1: (expm1(x) - expm1(-x)) / 2 has no cancellation; else e^{a/2} e^{a/2} / 2 - ...,
    // which overflows only where sinh does
    Tensor a = x.abs();
    Tensor small = a < 1.0;
    Tensor xs = guard(small, x, 0);
    Tensor s = (expm1_impl(xs) - expm1_impl(-xs)) * 0.5;
    Tensor h = (a * 0.5).exp();
    Tensor big = h * 0.5 * h - 0.5 / (h * h);
    return where(small, s, where(x < 0.0, -big, big));
  });
}
Tensor Tensor::cosh() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).cosh();
  return fmath(*this, [](const Tensor& x) {
    Tensor h = (x.abs() * 0.5).exp();
    return h * 0.5 * h + 0.5 / (h * h);
  });
}
Tensor Tensor::asinh() const {
  return fmath(*this, [](const Tensor& x) {
    // asinh|x| = log1p(a + a^2 / (1 + sqrt(1 + a^2))); for huge a (a^2 overflows): log(a) + ln 2
    Tensor a = x.abs();
    Tensor huge = a > 1e15;
    Tensor as = guard(huge.logical_not(), a, 1);
    Tensor a2 = as * as;
    Tensor r = where(huge, a.log() + kLn2, log1p_impl(as + a2 / ((a2 + 1.0).sqrt() + 1.0)));
    return where(x < 0.0, -r, r);
  });
}
Tensor Tensor::acosh() const {
  return fmath(*this, [](const Tensor& x) {
    // t = x - 1: log1p(t + sqrt(2t + t^2)); for huge x: log(x) + ln 2
    Tensor huge = x > 1e15;
    Tensor t = guard(huge.logical_not(), x, 1) - 1.0;
    return where(huge, x.log() + kLn2, log1p_impl(t + (t * 2.0 + t * t).sqrt()));
  });
}
Tensor Tensor::atanh() const {
  return fmath(*this, [](const Tensor& x) {
    Tensor a = x.abs();
    Tensor r = log1p_impl(a * 2.0 / (1.0 - a)) * 0.5;
    return where(x < 0.0, -r, r);
  });
}

Tensor Tensor::softplus(double beta, double threshold) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).softplus(beta, threshold);
  return fmath(*this, [&](const Tensor& x) {
    // log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow; z > threshold gives x, as PyTorch
    Tensor z = x * beta;
    Tensor sp = (kiln::maximum(z, zeros_like(z)) + log1p_impl((z.abs() * -1.0).exp())) * (1.0 / beta);
    return where(z > threshold, x, sp);
  });
}
Tensor Tensor::silu() const {
  return fmath(*this, [](const Tensor& x) { return x * x.sigmoid(); });
}
Tensor Tensor::gelu(bool tanh_approximation) const {
  return fmath(*this, [&](const Tensor& x) {
    if (tanh_approximation) {
      // 0.5 (1 + tanh(u)) = sigmoid(2 u): one exp and one reciprocal, and no cancellation near 0
      Tensor inner = (x + x * x * x * 0.044715) * std::sqrt(2.0 / kPi);
      return x * (inner * 2.0).sigmoid();
    }
    // 0.5 x (1 + erf(x / sqrt 2)); in the far negative tail 1 + erf(z) = erfc(-z) directly
    Tensor z = x * (std::numbers::sqrt2 / 2);
    Tensor tail = z < -2.0;
    Tensor one_plus = where(tail, erfc_cf(guard(tail, z * -1.0, 2), erfc_terms(x)), erf_impl(z) + 1.0);
    return x * 0.5 * one_plus;
  });
}

namespace {
// the GEMM matcher takes gelu(true) and its gradient into library epilogues by matching these
// graphs; registered as the program starts, by the file that defines gelu
[[maybe_unused]] const bool gelu_registered =
    (schedule::set_gelu_graph([](const ir::NodeRef& x) { return Tensor(x).gelu(true).node(); }),
     schedule::set_gelu_grad_graph([](const ir::NodeRef& x, const ir::NodeRef& dy) {
       // on a thread of its own: a NoGradGuard, Autocast or Jit recording of the caller's (all per
       // thread) would change the graph
       ir::NodeRef dx;
       std::thread([&] {
         Tensor in(x);
         dx = grad({in.gelu(true)}, {in}, {Tensor(dy)})[0].node();
       }).join();
       return dx;
     }),
     true);
}  // namespace

Tensor Tensor::elu(double alpha) const {
  return fmath(*this, [&](const Tensor& x) {
    return where(x > 0.0, x, expm1_impl(kiln::minimum(x, zeros_like(x))) * alpha);
  });
}
Tensor Tensor::selu() const {
  constexpr double alpha = 1.6732632423543772848170429916717;
  constexpr double scale = 1.0507009873554804934193349852946;
  return elu(alpha) * scale;
}
Tensor Tensor::leaky_relu(double negative_slope) const {
  need_numeric("leaky_relu", *this);
  return fmath(*this, [&](const Tensor& x) { return where(x > 0.0, x, x * negative_slope); });
}
Tensor Tensor::hardtanh(double min, double max) const {
  need_numeric("hardtanh", *this);
  if (min > max)
    fail("hardtanh",
         "min_val (" + std::to_string(min) + ") must be <= max_val (" + std::to_string(max) + ")");
  return clamp(min, max);
}
Tensor Tensor::relu6() const { return hardtanh(0, 6); }
Tensor Tensor::logsigmoid() const {
  return fmath(*this, [](const Tensor& x) {
    // min(x, 0) - log1p(e^-|x|)
    return kiln::minimum(x, zeros_like(x)) - log1p_impl((x.abs() * -1.0).exp());
  });
}
Tensor Tensor::mish() const {
  return fmath(*this, [](const Tensor& x) { return x * x.softplus().tanh(); });
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  if (mask.dtype() != DType::Bool)
    fail("masked_fill", "mask must be a bool tensor, got " + to_string(mask.dtype()));
  broadcast_shapes(shape(), mask.shape(), "masked_fill");
  Tensor m = Tensor(frontend::expand(mask.node(), shape()));
  if (!is_float(dtype()) && value.kind == Scalar::Kind::Float && value.v != std::floor(value.v))
    fail("masked_fill", "cannot fill a " + to_string(dtype()) + " tensor with " + std::to_string(value.v));
  Scalar v = is_float(dtype()) || value.kind != Scalar::Kind::Float ? value
                                                                    : Scalar(static_cast<long long>(value.v));
  return where(m, full({}, v, dtype()), *this);
}

}  // namespace kiln
