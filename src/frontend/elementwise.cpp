// Elementwise tensor ops: arithmetic with PyTorch promotion, math functions written from primitives.
#include <cmath>
#include <numbers>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::binary;
using frontend::cast;
using frontend::ewise;
using frontend::fail;
using ir::NodeRef;
using ir::Op;

namespace {

NodeRef scalar_node(Scalar s, DType t, const Shape& shape) { return frontend::full(shape, s, t); }

DType scalar_dtype(DType t, Scalar s) {
  if (s.kind == Scalar::Kind::Float) return promote_with_scalar(t, true);
  if (s.kind == Scalar::Kind::Int && t == DType::Bool) return DType::I64;
  return t;
}

// Promote both to a common dtype, then apply the binary primitive with broadcasting.
Tensor bin(const char* name, Op op, const Tensor& a, const Tensor& b) {
  DType t = promote_types(a.dtype(), b.dtype());
  return Tensor(binary(name, op, cast(a.node(), t), cast(b.node(), t)));
}
Tensor bin(const char* name, Op op, const Tensor& a, Scalar s, bool scalar_first = false) {
  DType t = scalar_dtype(a.dtype(), s);
  NodeRef x = cast(a.node(), t), c = scalar_node(s, t, a.shape());
  return Tensor(scalar_first ? binary(name, op, c, x) : binary(name, op, x, c));
}

Tensor unary(Op op, const Tensor& x) { return Tensor(ewise(op, {x.node()}, x.dtype())); }

void need_numeric(const char* op, const Tensor& x) {
  if (x.dtype() == DType::Bool)
    fail(op, "not supported for bool tensors (shape " + shape_str(x.shape()) + ")");
}

// Math on half types is computed in f32, then rounded back.
template <class F>
Tensor float_math(const Tensor& x, F f) {
  DType out = float_result(x.dtype());
  DType calc = (out == DType::F16 || out == DType::BF16) ? DType::F32 : out;
  return f(x.to(calc)).to(out);
}

Tensor logical(const Tensor& x) { return x.to(DType::Bool); }

// 1 / x in x's dtype (reciprocal() is autocast to f32, division is not)
Tensor recip(const Tensor& x) {
  return float_math(x, [](const Tensor& f) { return unary(Op::RECIP, f); });
}
// 1 / x as a division's divisor (ir::kDivisor): a / b is the correctly rounded quotient
Tensor divisor(const Tensor& x) {
  return float_math(x, [](const Tensor& f) {
    return Tensor(ir::make(Op::RECIP, f.dtype(), f.shape(), {f.node()}, {ir::kDivisor}));
  });
}

}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return bin("add", Op::ADD, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return bin("mul", Op::MUL, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Bool && b.dtype() == DType::Bool)
    fail("sub", "subtracting bool tensors is not supported");
  DType t = promote_types(a.dtype(), b.dtype());
  return a.to(t) + b.to(t).neg();
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  DType t = float_result(promote_types(a.dtype(), b.dtype()));
  return a.to(t) * divisor(b.to(t));
}
Tensor operator+(const Tensor& a, Scalar b) { return bin("add", Op::ADD, a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return bin("mul", Op::MUL, a, b); }
Tensor operator-(const Tensor& a, Scalar b) {
  return a + (b.kind == Scalar::Kind::Float ? Scalar(-b.v)
                                            : Scalar(static_cast<long long>(-static_cast<uint64_t>(b.i))));
}
Tensor operator/(const Tensor& a, Scalar b) {
  DType t = float_result(scalar_dtype(a.dtype(), b));
  return a.to(t) * divisor(full(a.shape(), b.v, t));
}
Tensor operator+(Scalar a, const Tensor& b) { return b + a; }
Tensor operator*(Scalar a, const Tensor& b) { return b * a; }
Tensor operator-(Scalar a, const Tensor& b) { return b.neg() + a; }
Tensor operator/(Scalar a, const Tensor& b) { return b.reciprocal() * a; }
Tensor operator-(const Tensor& a) { return a.neg(); }

Tensor Tensor::neg() const {
  need_numeric("neg", *this);
  return *this * Scalar(-1);
}
Tensor Tensor::reciprocal() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).reciprocal();
  return recip(*this);
}
Tensor Tensor::exp2() const {
  return float_math(*this, [](const Tensor& x) { return unary(Op::EXP2, x); });
}
Tensor Tensor::log2() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).log2();
  return float_math(*this, [](const Tensor& x) { return unary(Op::LOG2, x); });
}
Tensor Tensor::exp() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).exp();
  return float_math(*this, [](const Tensor& x) { return unary(Op::EXP2, x * std::numbers::log2e); });
}
Tensor Tensor::log() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).log();
  return float_math(*this, [](const Tensor& x) { return unary(Op::LOG2, x) * std::numbers::ln2; });
}
Tensor Tensor::sqrt() const {
  return float_math(*this, [](const Tensor& x) { return unary(Op::SQRT, x); });
}
Tensor Tensor::rsqrt() const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).rsqrt();
  return float_math(*this, [](const Tensor& x) { return unary(Op::RECIP, unary(Op::SQRT, x)); });
}
Tensor Tensor::sin() const {
  return float_math(*this, [](const Tensor& x) { return unary(Op::SIN, x); });
}
Tensor Tensor::cos() const {
  // cos(x) = sin(x + pi/2); the shift is done in f64 so large f32 arguments keep their precision
  DType out = float_result(dtype());
  return unary(Op::SIN, to(DType::F64) + std::numbers::pi / 2).to(out);
}
Tensor Tensor::sigmoid() const {
  // e = exp(-|x|) <= 1 never overflows (1/(exp(-x)+1) is 0 * inf in its gradient for x < -88):
  // 1/(1+e) for x >= 0, e/(1+e) below. |x| is taken as where(x >= 0, -x, x) so that the gradient at
  // 0 is sigmoid'(0) = 1/4, not split at abs's tie.
  return float_math(*this, [](const Tensor& x) {
    Tensor pos = x >= 0.0, e = where(pos, -x, x).exp(), r = (e + 1.0).reciprocal();
    return where(pos, r, e * r);
  });
}
Tensor Tensor::tanh() const {
  return float_math(*this, [](const Tensor& x) {
    // tanh|x| = (1 - e^-2|x|) / (1 + e^-2|x|) cancels for small |x|: there its odd Taylor series
    Tensor ax = x.abs(), t = (ax * -2.0).exp();
    Tensor big = (1.0 - t) / (1.0 + t);
    Tensor xs = where(ax < 0.0625, x, zeros_like(x)), x2 = xs * xs;  // no overflow where unused
    Tensor small =
        xs * (1.0 + x2 * (-1.0 / 3 + x2 * (2.0 / 15 + x2 * (-17.0 / 315 +
                                                            x2 * (62.0 / 2835 + x2 * (-1382.0 / 155925))))));
    return where(ax < 0.0625, small, where(x < 0.0, -big, big));
  });
}
Tensor Tensor::trunc() const {
  if (!is_float(dtype())) return *this;
  return float_math(*this, [](const Tensor& x) { return unary(Op::TRUNC, x); });
}
Tensor Tensor::relu() const {
  need_numeric("relu", *this);
  // relu'(0) = 0 as in PyTorch (maximum(x, 0) would split the tie); NaN stays NaN
  return where((*this > 0) | (*this != *this), *this, zeros_like(*this));
}
Tensor Tensor::abs() const {
  if (dtype() == DType::Bool || is_unsigned(dtype())) return *this;
  return kiln::maximum(*this, neg());
}

Tensor Tensor::pow(Scalar e) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).pow(e);
  if (!is_float(dtype()) && e.kind != Scalar::Kind::Float) {  // int ** int stays int (repeated squaring)
    if (e.i < 0)
      fail("pow", "integers to negative integer powers are not allowed (" + to_string(dtype()) + ")");
    Tensor r = ones_like(*this), b = *this;
    for (int64_t k = e.i; k > 0; k >>= 1, b = b * b)
      if (k & 1) r = r * b;
    return r;
  }
  // small integer exponents are plain multiplies: exact, and much faster than exp2/log2
  if (e.v == 1) return *this;
  if (e.v == 2) return *this * *this;
  if (e.v == 3) return *this * *this * *this;
  if (e.v == 0.5) return sqrt();
  if (e.v == -1) return reciprocal();
  DType t = scalar_dtype(dtype(), e);
  return pow(full({}, e, t));
}

Tensor Tensor::pow(const Tensor& e) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).pow(ac(e));
  DType t = promote_types(dtype(), e.dtype());
  if (!is_float(t)) {  // int ** int tensor: exact in f64 below 2^53, rounded back
    Tensor r = to(DType::F64).pow(e.to(DType::F64));
    return where(r < 0.0, (r - 0.5).trunc(), (r + 0.5).trunc()).to(t);
  }
  return float_math(to(t), [&](const Tensor& b) {
    Tensor x = e.to(b.dtype());
    // |b|^x = exp2(x*log2|b|); a negative base with an integral exponent takes the sign of (-1)^x,
    // with a fractional exponent it is NaN (as in PyTorch); x == 0 gives 1 even for b == 0 or NaN.
    Tensor mag = (x * b.abs().log2()).exp2();
    Tensor is_int = x.trunc() == x;
    Tensor odd = is_int & ((x * 0.5).trunc() != x * 0.5);
    Tensor neg_base = b < 0.0;
    Tensor r = where(neg_base & odd, -mag, mag);
    r = where(neg_base & ~is_int, full_like(mag, NAN), r);
    return where(x == 0.0, ones_like(mag), r);
  });
}

Tensor Tensor::maximum(const Tensor& o) const { return bin("maximum", Op::MAX, *this, o); }
Tensor Tensor::minimum(const Tensor& o) const {
  DType t = promote_types(dtype(), o.dtype());
  if (is_float(t)) return (-this->to(t)).maximum(-o.to(t)).neg();  // keeps NaN propagation
  if (t == DType::Bool) return logical_and(o);
  Tensor a = to(t), b = o.to(t);
  return where(a < b, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) { return a.maximum(b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return a.minimum(b); }

// comparisons: lt and ne are primitives; the rest are built so NaN compares false like IEEE
Tensor Tensor::lt(const Tensor& o) const { return bin("lt", Op::CMPLT, *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return bin("ne", Op::CMPNE, *this, o); }
Tensor Tensor::eq(const Tensor& o) const { return ne(o).logical_not(); }
Tensor Tensor::gt(const Tensor& o) const { return o.lt(*this); }
Tensor Tensor::le(const Tensor& o) const {
  if (!is_float(promote_types(dtype(), o.dtype()))) return gt(o).logical_not();
  return lt(o) | eq(o);
}
Tensor Tensor::ge(const Tensor& o) const {
  if (!is_float(promote_types(dtype(), o.dtype()))) return lt(o).logical_not();
  return gt(o) | eq(o);
}
Tensor operator==(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
#define KILN_CMP_SCALAR(OP, M) \
  Tensor operator OP(const Tensor& a, Scalar b) { return a.M(full({}, b, scalar_dtype(a.dtype(), b))); }
KILN_CMP_SCALAR(==, eq)
KILN_CMP_SCALAR(!=, ne)
KILN_CMP_SCALAR(<, lt)
KILN_CMP_SCALAR(<=, le)
KILN_CMP_SCALAR(>, gt)
KILN_CMP_SCALAR(>=, ge)
#undef KILN_CMP_SCALAR

Tensor operator&(const Tensor& a, const Tensor& b) { return bin("bitwise_and", Op::AND, a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bin("bitwise_or", Op::OR, a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bin("bitwise_xor", Op::XOR, a, b); }
Tensor operator~(const Tensor& a) {
  if (is_float(a.dtype())) fail("bitwise_not", "not defined for " + to_string(a.dtype()) + " tensors");
  return Tensor(binary("bitwise_not", Op::XOR, a.node(), ir::const_int(-1, a.dtype(), a.shape())));
}
Tensor Tensor::logical_not() const { return ~logical(*this); }
Tensor Tensor::logical_and(const Tensor& o) const { return logical(*this) & logical(o); }
Tensor Tensor::logical_or(const Tensor& o) const { return logical(*this) | logical(o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return logical(*this) ^ logical(o); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = promote_types(a.dtype(), b.dtype());
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  return Tensor(ir::make(Op::WHERE, t, s,
                         {frontend::expand(cond.to(DType::Bool).node(), s),
                          frontend::expand(a.to(t).node(), s), frontend::expand(b.to(t).node(), s)}));
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return where(cond, a, full({}, b, scalar_dtype(a.dtype(), b)));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  return where(cond, full({}, a, scalar_dtype(b.dtype(), a)), b);
}

}  // namespace kiln
