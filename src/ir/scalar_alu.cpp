// Scalar elementwise semantics (see scalar_alu.h), used by constant folding and the interpreter.
#include "ir/scalar_alu.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::ir {

namespace {

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

// double -> float with IEEE round-to-nearest-even, overflowing to inf (no UB for huge values).
float to_f32(double v) {
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) {
    const double limit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);  // FLT_MAX + half ulp
    float m = std::fabs(v) >= limit ? std::numeric_limits<float>::infinity() : FLT_MAX;
    return v < 0 ? -m : m;
  }
  return static_cast<float>(v);
}

Scalar cast(const Scalar& x, DType t) {
  Scalar r{t};
  if (is_float(t)) {
    double v = is_float(x.dtype) ? x.f : int_to_double(x.i, x.dtype);
    r.f = round_to(v, t);
  } else {
    r.i = is_float(x.dtype) ? float_to_int(x.f, t) : wrap_int(x.i, t);
  }
  return r;
}

uint64_t bits_of(const Scalar& x) {
  switch (x.dtype) {
    case DType::F64: {
      uint64_t b;
      std::memcpy(&b, &x.f, 8);
      return b;
    }
    case DType::F32: {
      float v = to_f32(x.f);
      uint32_t b;
      std::memcpy(&b, &v, 4);
      return b;
    }
    case DType::F16: return float_to_half(to_f32(x.f));
    case DType::BF16: return float_to_bf16(to_f32(x.f));
    default: {
      int bits = dtype_size(x.dtype) * 8;
      return bits == 64 ? u(x.i) : u(x.i) & ((uint64_t{1} << bits) - 1);
    }
  }
}

Scalar from_bits(uint64_t b, DType t) {
  Scalar r{t};
  switch (t) {
    case DType::F64: std::memcpy(&r.f, &b, 8); break;
    case DType::F32: {
      uint32_t b32 = static_cast<uint32_t>(b);
      float x;
      std::memcpy(&x, &b32, 4);
      r.f = x;
      break;
    }
    case DType::F16: r.f = half_to_float(static_cast<uint16_t>(b)); break;
    case DType::BF16: r.f = bf16_to_float(static_cast<uint16_t>(b)); break;
    default: r.i = wrap_int(static_cast<int64_t>(b), t); break;
  }
  return r;
}

const char* float_unary(Op op, double x, double& out) {
  switch (op) {
    case Op::EXP2: out = std::exp2(x); return nullptr;
    case Op::LOG2: out = std::log2(x); return nullptr;
    case Op::SIN: out = std::sin(x); return nullptr;
    case Op::SQRT: out = std::sqrt(x); return nullptr;
    case Op::RECIP: out = 1.0 / x; return nullptr;
    case Op::TRUNC: out = std::trunc(x); return nullptr;
    default: return "unsupported unary op";
  }
}

const char* float_binary(Op op, double a, double b, double& out) {
  switch (op) {
    case Op::ADD: out = a + b; return nullptr;
    case Op::MUL: out = a * b; return nullptr;
    case Op::MAX:
      out = (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
      return nullptr;
    case Op::CMPLT: out = a < b; return nullptr;
    case Op::CMPNE: out = a != b; return nullptr;
    default: return "op not defined on floats";
  }
}

// Integer binary op on values of dtype st, result wrapped to dtype t.
const char* int_binary(Op op, int64_t a, int64_t b, DType st, DType t, int64_t& out) {
  const bool u64 = st == DType::U64;
  switch (op) {
    case Op::ADD: out = wrap_int(static_cast<int64_t>(u(a) + u(b)), t); return nullptr;
    case Op::MUL: out = wrap_int(static_cast<int64_t>(u(a) * u(b)), t); return nullptr;
    case Op::MAX: out = (u64 ? u(a) > u(b) : a > b) ? a : b; return nullptr;
    case Op::IDIV:  // C truncation; x / 0 is 0
      if (b == 0)
        out = 0;
      else if (u64)
        out = static_cast<int64_t>(u(a) / u(b));
      else if (a == INT64_MIN && b == -1)
        out = wrap_int(INT64_MIN, t);
      else
        out = wrap_int(a / b, t);
      return nullptr;
    case Op::MOD:  // the sign of a; x % 0 is 0
      if (b == 0)
        out = 0;
      else if (u64)
        out = static_cast<int64_t>(u(a) % u(b));
      else if (b == -1)
        out = 0;
      else
        out = wrap_int(a % b, t);
      return nullptr;
    case Op::CMPLT: out = u64 ? u(a) < u(b) : a < b; return nullptr;
    case Op::CMPNE: out = a != b; return nullptr;
    case Op::AND: out = wrap_int(a & b, t); return nullptr;
    case Op::OR: out = wrap_int(a | b, t); return nullptr;
    case Op::XOR: out = wrap_int(a ^ b, t); return nullptr;
    case Op::SHL:
    case Op::SHR: {
      if (st == DType::Bool) return "shift of bool";
      unsigned c = static_cast<unsigned>(u(b) % static_cast<uint64_t>(dtype_size(st) * 8));
      if (op == Op::SHL)
        out = wrap_int(static_cast<int64_t>(u(a) << c), t);
      else
        out = wrap_int(u64 ? static_cast<int64_t>(u(a) >> c) : a >> c, t);  // arithmetic for signed
      return nullptr;
    }
    default: return "unsupported binary op";
  }
}

}  // namespace

int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::I8: return static_cast<int8_t>(v);
    case DType::I16: return static_cast<int16_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    case DType::U32: return static_cast<uint32_t>(v);
    default: return v;  // i64, u64 (bits)
  }
}

double int_to_double(int64_t v, DType t) {
  return t == DType::U64 ? static_cast<double>(u(v)) : static_cast<double>(v);
}

double round_to(double v, DType t) {
  switch (t) {
    case DType::F32: return to_f32(v);
    case DType::F16: return half_to_float(float_to_half(to_f32(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(to_f32(v)));
    default: return v;
  }
}

int64_t float_to_int(double v, DType t) {
  if (t == DType::Bool) return v != 0;
  if (!std::isfinite(v)) return 0;
  double tr = std::trunc(v);
  const double two63 = 9223372036854775808.0;
  if (tr >= -two63 && tr < two63) return wrap_int(static_cast<int64_t>(tr), t);
  if (t == DType::U64 && tr >= two63 && tr < 2 * two63)
    return static_cast<int64_t>(static_cast<uint64_t>(tr));
  return 0;  // out of range of every integer type: defined as 0 here
}

const char* alu_type_error(Op op, DType t, std::span<const DType> src) {
  const size_t want = is_unary(op) ? 1 : is_binary(op) ? 2 : 3;
  if (!is_elementwise(op)) return "unsupported elementwise op";
  if (src.size() != want) return "wrong number of sources";
  if (op == Op::CAST) return nullptr;
  if (op == Op::BITCAST)
    return dtype_size(src[0]) != dtype_size(t) ? "BITCAST between types of different sizes" : nullptr;
  if (is_unary(op)) {
    if (src[0] != t) return "unary source dtype differs from the result";
    if (!is_float(t) && op != Op::TRUNC) return "op needs a float dtype";
    return nullptr;
  }
  if (is_binary(op)) {
    if (src[0] != src[1]) return "binary sources of different dtypes";
    if (is_comparison(op) ? t != DType::Bool : t != src[0])
      return "binary result dtype does not match its sources";
    return nullptr;
  }
  if (op == Op::WHERE)
    return src[0] != DType::Bool || src[1] != t || src[2] != t ? "WHERE needs (bool, T, T) -> T" : nullptr;
  for (DType s : src)  // MULACC
    if (s != t) return "MULACC sources must have the result dtype";
  return nullptr;
}

const char* eval_alu(Op op, DType t, std::span<const Scalar> src, Scalar& out) {
  out = Scalar{t};
  if (op == Op::CAST) {
    out = cast(src[0], t);
    return nullptr;
  }
  if (op == Op::BITCAST) {
    out = from_bits(bits_of(src[0]), t);
    return nullptr;
  }
  if (is_unary(op)) {
    if (!is_float(t)) {  // TRUNC of an integer
      out.i = src[0].i;
      return nullptr;
    }
    return float_unary(op, src[0].f, out.f);
  }
  if (is_binary(op)) {
    const Scalar &a = src[0], &b = src[1];
    if (!is_float(a.dtype)) return int_binary(op, a.i, b.i, a.dtype, t, out.i);
    double r = 0;
    const char* why = float_binary(op, a.f, b.f, r);
    if (is_comparison(op))
      out.i = static_cast<int64_t>(r);
    else
      out.f = r;
    return why;
  }
  if (op == Op::WHERE) {
    const Scalar& pick = src[0].i ? src[1] : src[2];
    out.f = pick.f;
    out.i = pick.i;
    return nullptr;
  }
  if (is_float(t))  // MULACC
    out.f = src[0].f * src[1].f + src[2].f;
  else
    out.i = wrap_int(static_cast<int64_t>(u(src[0].i) * u(src[1].i) + u(src[2].i)), t);
  return nullptr;
}

}  // namespace kiln::ir
