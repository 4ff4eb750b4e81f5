// Reference interpreter: evaluates tensor-level graphs straight from the IR, element by element,
// implementing the "Tensor-level semantics" comment in ir/ops.h exactly.
#include "runtime/interpreter.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/error.h"
#include "runtime/buffer.h"

namespace kiln::ref {

using ir::Node;
using ir::NodeRef;
using ir::Op;

int64_t Array::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace {

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t k = 0; k < s.size(); k++) os << (k ? "," : "") << s[k];
  os << ")";
  return os.str();
}

[[noreturn]] void fail(const Node& n, const std::string& why) {
  std::ostringstream os;
  os << "interpreter: " << why << " in " << n.str();
  if (n.shape.empty()) os << " ()";
  if (!n.src.empty()) {
    os << " with sources [";
    for (size_t k = 0; k < n.src.size(); k++)
      os << (k ? "; " : "") << n.src[k]->str() << (n.src[k]->shape.empty() ? " ()" : "");
    os << "]";
  }
  throw Error(os.str());
}

// Wraps an integer to the width of t (two's complement; unsigned types to their range; bool to 0/1).
int64_t wrap(int64_t v, DType t) {
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

// double -> float with IEEE round-to-nearest-even, overflowing to inf (no UB for huge values).
float to_f32(double v) {
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) {
    const double limit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);  // FLT_MAX + half ulp
    float m = std::fabs(v) >= limit ? std::numeric_limits<float>::infinity() : FLT_MAX;
    return v < 0 ? -m : m;
  }
  return static_cast<float>(v);
}

// Rounds a double to the precision of float dtype t.
double round_to(double v, DType t) {
  switch (t) {
    case DType::F32: return to_f32(v);
    case DType::F16: return half_to_float(float_to_half(to_f32(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(to_f32(v)));
    default: return v;
  }
}

// float -> integer/bool conversion: truncation toward zero, NaN/inf -> 0, ->bool is != 0.
int64_t float_to_int(double v, DType t) {
  if (t == DType::Bool) return v != 0;
  if (!std::isfinite(v)) return 0;
  double tr = std::trunc(v);
  const double two63 = 9223372036854775808.0;
  if (tr >= -two63 && tr < two63) return wrap(static_cast<int64_t>(tr), t);
  if (t == DType::U64 && tr >= two63 && tr < 2 * two63)
    return static_cast<int64_t>(static_cast<uint64_t>(tr));
  return 0;  // out of range of every integer type: defined as 0 here
}

// CAST of element k of a to dtype `to`, written to out[k].
void cast_elem(const Array& a, int64_t k, Array& out) {
  if (is_float(out.dtype)) {
    double v = is_float(a.dtype) ? a.f[k] : int_to_double(a.i[k], a.dtype);
    out.f[k] = round_to(v, out.dtype);
  } else {
    out.i[k] = is_float(a.dtype) ? float_to_int(a.f[k], out.dtype) : wrap(a.i[k], out.dtype);
  }
}

uint64_t bits_of(const Array& a, int64_t k) {
  switch (a.dtype) {
    case DType::F64: {
      uint64_t b;
      std::memcpy(&b, &a.f[k], 8);
      return b;
    }
    case DType::F32: {
      float x = to_f32(a.f[k]);
      uint32_t b;
      std::memcpy(&b, &x, 4);
      return b;
    }
    case DType::F16: return float_to_half(to_f32(a.f[k]));
    case DType::BF16: return float_to_bf16(to_f32(a.f[k]));
    default: {
      int bits = dtype_size(a.dtype) * 8;
      return bits == 64 ? u(a.i[k]) : u(a.i[k]) & ((uint64_t{1} << bits) - 1);
    }
  }
}

void from_bits(uint64_t b, int64_t k, Array& out) {
  switch (out.dtype) {
    case DType::F64: std::memcpy(&out.f[k], &b, 8); return;
    case DType::F32: {
      uint32_t b32 = static_cast<uint32_t>(b);
      float x;
      std::memcpy(&x, &b32, 4);
      out.f[k] = x;
      return;
    }
    case DType::F16: out.f[k] = half_to_float(static_cast<uint16_t>(b)); return;
    case DType::BF16: out.f[k] = bf16_to_float(static_cast<uint16_t>(b)); return;
    default: out.i[k] = wrap(static_cast<int64_t>(b), out.dtype); return;
  }
}

Array make_array(const Shape& shape, DType t) {
  Array a;
  a.shape = shape;
  a.dtype = t;
  if (is_float(t))
    a.f.assign(static_cast<size_t>(a.numel()), 0.0);
  else
    a.i.assign(static_cast<size_t>(a.numel()), 0);
  return a;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// Builds an array of out_shape whose element at multi-index `o` is in[map(o)], or 0 where map returns
// false. map(o, in_idx) fills in_idx (rank of in.shape).
template <class F>
Array gather(const Array& in, const Shape& out_shape, F map) {
  Array out = make_array(out_shape, in.dtype);
  const int64_t n = out.numel();
  const size_t orank = out_shape.size(), irank = in.shape.size();
  auto ist = strides_of(in.shape);
  std::vector<int64_t> o(orank, 0), idx(irank, 0);
  bool fl = is_float(in.dtype);
  for (int64_t k = 0; k < n; k++) {
    if (map(o.data(), idx.data())) {
      int64_t src = 0;
      for (size_t d = 0; d < irank; d++) src += idx[d] * ist[d];
      if (fl)
        out.f[k] = in.f[src];
      else
        out.i[k] = in.i[src];
    }
    for (size_t d = orank; d-- > 0;) {  // advance the row-major multi-index
      if (++o[d] < out_shape[d]) break;
      o[d] = 0;
    }
  }
  return out;
}

Array read_buffer(const Node& n) {
  std::shared_ptr<const Buffer> hb = on_host(n.buffer);
  const Buffer& b = *hb;
  if (b.numel != n.numel())
    fail(n, "buffer of " + std::to_string(b.numel) + " " + dtype_name(b.dtype) + " elements does not match");
  Array raw;
  raw.shape = n.shape;
  raw.dtype = b.dtype;
  if (is_float(b.dtype)) {
    raw.f.resize(static_cast<size_t>(b.numel));
    for (int64_t k = 0; k < b.numel; k++) raw.f[k] = b.get_f(k);
  } else {
    raw.i.resize(static_cast<size_t>(b.numel));
    for (int64_t k = 0; k < b.numel; k++) raw.i[k] = b.get_i(k);
  }
  if (b.dtype == n.dtype) return raw;
  Array out = make_array(n.shape, n.dtype);  // a buffer of another dtype: converted as by CAST
  for (int64_t k = 0; k < out.numel(); k++) cast_elem(raw, k, out);
  return out;
}

Array eval_const(const Node& n) {
  Array a = make_array(n.shape, n.dtype);
  if (is_float(n.dtype))
    std::fill(a.f.begin(), a.f.end(), n.fval);
  else
    std::fill(a.i.begin(), a.i.end(), wrap(n.ival(), n.dtype));
  return a;
}

Array eval_iota(const Node& n) {
  if (n.arg.size() != 1 || n.arg[0] < 0 || n.arg[0] >= static_cast<int64_t>(n.shape.size()))
    fail(n, "IOTA needs arg {dim} with a valid dim");
  Array a = make_array(n.shape, n.dtype);
  auto st = strides_of(n.shape);
  size_t d = static_cast<size_t>(n.arg[0]);
  for (int64_t k = 0; k < a.numel(); k++) {
    int64_t v = (k / st[d]) % n.shape[d];
    if (is_float(n.dtype))
      a.f[k] = round_to(static_cast<double>(v), n.dtype);
    else
      a.i[k] = wrap(v, n.dtype);
  }
  return a;
}

// softmax(q k^T * scale, causal: top-left aligned) v over equal batch dims, in f64, rounded once.
Array eval_attention(const Node& n, const Array& q, const Array& k, const Array& v) {
  size_t r = n.shape.size();
  if (r < 2 || q.shape.size() != r || k.shape.size() != r || v.shape.size() != r)
    fail(n, "ATTENTION needs sources of its rank (at least 2)");
  int64_t tq = q.shape[r - 2], tk = k.shape[r - 2], d = q.shape[r - 1], dv = v.shape[r - 1];
  Array out = make_array(n.shape, n.dtype);
  int64_t batch = tq * dv == 0 ? 0 : out.numel() / (tq * dv);
  bool causal = n.arg.at(0) != 0;
  std::vector<double> p(static_cast<size_t>(tk));
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < tq; i++) {
      int64_t keys = causal ? std::min(tk, i + 1) : tk;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < keys; j++) {
        double s = 0;
        for (int64_t c = 0; c < d; c++) s += q.f[(b * tq + i) * d + c] * k.f[(b * tk + j) * d + c];
        p[j] = s * n.fval;
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j < keys; j++) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t c = 0; c < dv; c++) {
        double acc = 0;
        for (int64_t j = 0; j < keys; j++) acc += p[j] * v.f[(b * tk + j) * dv + c];
        out.f[(b * tq + i) * dv + c] = round_to(keys == 0 ? 0.0 : acc / sum, n.dtype);
      }
    }
  return out;
}

Array eval_reduce(const Node& n, const Array& in) {
  if (n.arg.empty() || n.arg[0] < 0 || n.arg[0] >= static_cast<int64_t>(Op::COUNT_))
    fail(n, "bad REDUCE arg");
  Op rop = static_cast<Op>(n.arg[0]);
  if (rop != Op::ADD && rop != Op::MUL && rop != Op::MAX)
    fail(n, std::string("unsupported reduce op ") + ir::op_name(rop));
  if (is_float(n.dtype) != is_float(in.dtype)) fail(n, "REDUCE between float and non-float dtypes");
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  Shape out_shape = in.shape;
  std::vector<bool> reduced(in.shape.size(), false);
  for (size_t k = 1; k < n.arg.size(); k++) {
    int64_t ax = n.arg[k] < 0 ? n.arg[k] + rank : n.arg[k];
    if (ax < 0 || ax >= rank || reduced[ax])
      fail(n, "bad or repeated REDUCE axis " + std::to_string(n.arg[k]));
    reduced[ax] = true;
    out_shape[ax] = 1;
  }
  if (out_shape != n.shape) fail(n, "REDUCE of " + shape_str(in.shape) + " gives " + shape_str(out_shape));
  Array out = make_array(out_shape, n.dtype);
  const bool fl = is_float(n.dtype);
  const DType t = n.dtype;
  // identities
  if (fl) {
    double id = rop == Op::ADD ? 0.0 : rop == Op::MUL ? 1.0 : -std::numeric_limits<double>::infinity();
    std::fill(out.f.begin(), out.f.end(), id);
  } else {
    int64_t id = 0;
    if (rop == Op::MUL) {
      id = 1;
    } else if (rop == Op::MAX) {
      switch (t) {
        case DType::I8: id = INT8_MIN; break;
        case DType::I16: id = INT16_MIN; break;
        case DType::I32: id = INT32_MIN; break;
        case DType::I64: id = INT64_MIN; break;
        default: id = 0;  // bool and unsigned
      }
    }
    std::fill(out.i.begin(), out.i.end(), id);
  }
  auto ost = strides_of(out_shape);
  std::vector<int64_t> idx(in.shape.size(), 0);
  const int64_t nin = in.numel();
  int64_t o = 0;  // output flat index of idx
  for (int64_t k = 0; k < nin; k++) {
    if (fl) {
      double& acc = out.f[o];
      double v = in.f[k];
      if (rop == Op::ADD)
        acc += v;
      else if (rop == Op::MUL)
        acc *= v;
      else
        acc =
            (std::isnan(acc) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN() : std::max(acc, v);
    } else {
      int64_t& acc = out.i[o];
      int64_t v = wrap(in.i[k], t);
      if (rop == Op::ADD)
        acc = wrap(static_cast<int64_t>(u(acc) + u(v)), t);
      else if (rop == Op::MUL)
        acc = wrap(static_cast<int64_t>(u(acc) * u(v)), t);
      else if (t == DType::U64 ? u(v) > u(acc) : v > acc)
        acc = v;
    }
    for (size_t d = idx.size(); d-- > 0;) {
      if (!reduced[d]) o += ost[d];
      if (++idx[d] < in.shape[d]) break;
      if (!reduced[d]) o -= ost[d] * in.shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

Array eval_movement(const Node& n, const Array& in) {
  const Shape& is = in.shape;
  const size_t rank = is.size();
  auto bad = [&](const std::string& why) { fail(n, why + " (source shape " + shape_str(is) + ")"); };
  switch (n.op) {
    case Op::RESHAPE: {
      Array out = in;
      out.shape = n.shape;
      if (out.numel() != in.numel()) bad("RESHAPE changes the number of elements");
      return out;
    }
    case Op::CONTIGUOUS:
    case Op::DETACH: {
      if (n.shape != is) bad("CONTIGUOUS changes the shape");
      return in;
    }
    case Op::PERMUTE: {
      if (n.arg.size() != rank || n.shape.size() != rank) bad("PERMUTE rank mismatch");
      std::vector<bool> seen(rank, false);
      for (size_t d = 0; d < rank; d++) {
        int64_t p = n.arg[d];
        if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) bad("PERMUTE arg is not a permutation");
        seen[p] = true;
        if (n.shape[d] != is[p]) bad("PERMUTE shape mismatch");
      }
      return gather(in, n.shape, [&](const int64_t* o, int64_t* idx) {
        for (size_t d = 0; d < rank; d++) idx[n.arg[d]] = o[d];
        return true;
      });
    }
    case Op::EXPAND: {
      if (n.shape.size() != rank) bad("EXPAND rank mismatch");
      for (size_t d = 0; d < rank; d++)
        if (is[d] != n.shape[d] && is[d] != 1) bad("EXPAND of a dim that is not 1");
      return gather(in, n.shape, [&](const int64_t* o, int64_t* idx) {
        for (size_t d = 0; d < rank; d++) idx[d] = is[d] == 1 ? 0 : o[d];
        return true;
      });
    }
    case Op::PAD: {
      if (n.arg.size() != 2 * rank || n.shape.size() != rank) bad("PAD needs {before, after} per dim");
      for (size_t d = 0; d < rank; d++)
        if (n.shape[d] != is[d] + n.arg[2 * d] + n.arg[2 * d + 1]) bad("PAD shape mismatch");
      return gather(in, n.shape, [&](const int64_t* o, int64_t* idx) {
        for (size_t d = 0; d < rank; d++) {
          idx[d] = o[d] - n.arg[2 * d];
          if (idx[d] < 0 || idx[d] >= is[d]) return false;
        }
        return true;
      });
    }
    case Op::SHRINK: {
      if (n.arg.size() != 2 * rank || n.shape.size() != rank) bad("SHRINK needs {start, end} per dim");
      for (size_t d = 0; d < rank; d++) {
        int64_t s = n.arg[2 * d], e = n.arg[2 * d + 1];
        if (s < 0 || s > e || e > is[d] || n.shape[d] != e - s)
          bad("SHRINK range out of bounds or shape mismatch");
      }
      return gather(in, n.shape, [&](const int64_t* o, int64_t* idx) {
        for (size_t d = 0; d < rank; d++) idx[d] = o[d] + n.arg[2 * d];
        return true;
      });
    }
    case Op::FLIP: {
      if (n.arg.size() != rank || n.shape != is) bad("FLIP needs one flag per dim and keeps the shape");
      return gather(in, n.shape, [&](const int64_t* o, int64_t* idx) {
        for (size_t d = 0; d < rank; d++) idx[d] = n.arg[d] ? is[d] - 1 - o[d] : o[d];
        return true;
      });
    }
    default: fail(n, "not a movement op");
  }
}

double float_unary(const Node& n, double x) {
  switch (n.op) {
    case Op::EXP2: return std::exp2(x);
    case Op::LOG2: return std::log2(x);
    case Op::SIN: return std::sin(x);
    case Op::SQRT: return std::sqrt(x);
    case Op::RECIP: return 1.0 / x;
    case Op::TRUNC: return std::trunc(x);
    default: fail(n, "unsupported unary op");
  }
}

double float_binary(const Node& n, double a, double b) {
  switch (n.op) {
    case Op::ADD: return a + b;
    case Op::MUL: return a * b;
    case Op::MAX:
      return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
    case Op::CMPLT: return a < b;
    case Op::CMPNE: return a != b;
    default: fail(n, "op not defined on floats");
  }
}

// Integer binary op on values of dtype st, result wrapped to dtype t.
int64_t int_binary(const Node& n, int64_t a, int64_t b, DType st, DType t) {
  const bool u64 = st == DType::U64;
  switch (n.op) {
    case Op::ADD: return wrap(static_cast<int64_t>(u(a) + u(b)), t);
    case Op::MUL: return wrap(static_cast<int64_t>(u(a) * u(b)), t);
    case Op::MAX: return (u64 ? u(a) > u(b) : a > b) ? a : b;
    case Op::IDIV:
      if (b == 0) return 0;
      if (u64) return static_cast<int64_t>(u(a) / u(b));
      if (a == INT64_MIN && b == -1) return wrap(INT64_MIN, t);
      return wrap(a / b, t);
    case Op::MOD:
      if (b == 0) return 0;
      if (u64) return static_cast<int64_t>(u(a) % u(b));
      if (b == -1) return 0;
      return wrap(a % b, t);
    case Op::CMPLT: return u64 ? u(a) < u(b) : a < b;
    case Op::CMPNE: return a != b;
    case Op::AND: return wrap(a & b, t);
    case Op::OR: return wrap(a | b, t);
    case Op::XOR: return wrap(a ^ b, t);
    case Op::SHL:
    case Op::SHR: {
      if (st == DType::Bool) fail(n, "shift of bool");
      unsigned c = static_cast<unsigned>(u(b) % static_cast<uint64_t>(dtype_size(st) * 8));
      if (n.op == Op::SHL) return wrap(static_cast<int64_t>(u(a) << c), t);
      return wrap(u64 ? static_cast<int64_t>(u(a) >> c) : a >> c, t);  // arithmetic for signed types
    }
    default: fail(n, "unsupported binary op");
  }
}

Array eval_elementwise(const Node& n, const std::vector<const Array*>& s) {
  const size_t want = is_unary(n.op) ? 1 : is_binary(n.op) ? 2 : 3;
  if (s.size() != want) fail(n, "wrong number of sources");
  for (auto* a : s)
    if (a->shape != n.shape)
      fail(n, "elementwise source of shape " + shape_str(a->shape) + " (no implicit broadcast)");
  Array out = make_array(n.shape, n.dtype);
  const int64_t ne = out.numel();
  const bool fl = is_float(n.dtype);
  if (n.op == Op::CAST) {
    for (int64_t k = 0; k < ne; k++) cast_elem(*s[0], k, out);
    return out;
  }
  if (n.op == Op::BITCAST) {
    if (dtype_size(s[0]->dtype) != dtype_size(n.dtype)) fail(n, "BITCAST between types of different sizes");
    for (int64_t k = 0; k < ne; k++) from_bits(bits_of(*s[0], k), k, out);
    return out;
  }
  if (is_unary(n.op)) {
    if (s[0]->dtype != n.dtype) fail(n, "unary source dtype differs from the result");
    if (fl) {
      for (int64_t k = 0; k < ne; k++) out.f[k] = float_unary(n, s[0]->f[k]);
    } else {
      if (n.op != Op::TRUNC) fail(n, "op needs a float dtype");
      out.i = s[0]->i;
    }
    return out;
  }
  if (is_binary(n.op)) {
    const Array &a = *s[0], &b = *s[1];
    if (a.dtype != b.dtype) fail(n, "binary sources of different dtypes");
    if (ir::is_comparison(n.op) ? n.dtype != DType::Bool : n.dtype != a.dtype)
      fail(n, "binary result dtype does not match its sources");
    if (is_float(a.dtype)) {
      if (ir::is_comparison(n.op)) {
        for (int64_t k = 0; k < ne; k++) out.i[k] = static_cast<int64_t>(float_binary(n, a.f[k], b.f[k]));
      } else {
        for (int64_t k = 0; k < ne; k++) out.f[k] = float_binary(n, a.f[k], b.f[k]);
      }
    } else {
      for (int64_t k = 0; k < ne; k++) out.i[k] = int_binary(n, a.i[k], b.i[k], a.dtype, n.dtype);
    }
    return out;
  }
  if (n.op == Op::WHERE) {
    if (s[0]->dtype != DType::Bool || s[1]->dtype != n.dtype || s[2]->dtype != n.dtype)
      fail(n, "WHERE needs (bool, T, T) -> T");
    for (int64_t k = 0; k < ne; k++) {
      const Array& pick = s[0]->i[k] ? *s[1] : *s[2];
      if (fl)
        out.f[k] = pick.f[k];
      else
        out.i[k] = pick.i[k];
    }
    return out;
  }
  if (n.op == Op::MULACC) {
    for (auto* a : s)
      if (a->dtype != n.dtype) fail(n, "MULACC sources must have the result dtype");
    for (int64_t k = 0; k < ne; k++) {
      if (fl)
        out.f[k] = s[0]->f[k] * s[1]->f[k] + s[2]->f[k];
      else
        out.i[k] = wrap(static_cast<int64_t>(u(s[0]->i[k]) * u(s[1]->i[k]) + u(s[2]->i[k])), n.dtype);
    }
    return out;
  }
  fail(n, "unsupported elementwise op");
}

Array eval_node(const Node& n, const std::vector<const Array*>& s) {
  for (auto d : n.shape)
    if (d < 0) fail(n, "negative dimension");
  switch (n.op) {
    case Op::CONST: return eval_const(n);
    case Op::IOTA: return eval_iota(n);
    case Op::REDUCE:
      if (s.size() != 1) fail(n, "REDUCE needs one source");
      return eval_reduce(n, *s[0]);
    case Op::BUFFER: fail(n, "BUFFER node without a buffer");
    case Op::EXTERNAL: fail(n, "EXTERNAL node without a buffer (external ops are computed when created)");
    case Op::ATTENTION:
      if (s.size() != 3) fail(n, "ATTENTION needs three sources");
      return eval_attention(n, *s[0], *s[1], *s[2]);
    default: break;
  }
  if (ir::is_movement(n.op) || n.op == Op::CONTIGUOUS || n.op == Op::DETACH) {
    if (s.size() != 1) fail(n, "movement op needs one source");
    return eval_movement(n, *s[0]);
  }
  if (ir::is_elementwise(n.op)) return eval_elementwise(n, s);
  fail(n, std::string("kernel-level op ") + ir::op_name(n.op) + " is not evaluated by the interpreter");
}

}  // namespace

double Array::at(int64_t k) const { return is_float(dtype) ? f[k] : int_to_double(i[k], dtype); }

std::vector<Array> evaluate(const std::vector<NodeRef>& roots, bool use_realized) {
  for (auto& r : roots)
    if (!r) throw Error("interpreter: null root node");
  auto order = ir::toposort(roots);
  auto from_buffer = [&](const Node* n) { return n->buffer && (use_realized || n->op == Op::BUFFER); };
  // Which nodes are needed (sources of realized nodes are not), and how many pending uses each has.
  std::unordered_map<const Node*, int64_t> uses;
  std::unordered_set<const Node*> needed;
  for (auto& r : roots) {
    needed.insert(r.get());
    uses[r.get()]++;
  }
  for (size_t k = order.size(); k-- > 0;) {
    const Node* n = order[k].get();
    if (!needed.count(n) || from_buffer(n)) continue;
    for (auto& s : n->src) {
      needed.insert(s.get());
      uses[s.get()]++;
    }
  }
  std::unordered_map<const Node*, Array> vals;
  std::vector<const Array*> srcs;
  for (auto& ref : order) {
    const Node* n = ref.get();
    if (!needed.count(n)) continue;
    if (from_buffer(n)) {
      vals.emplace(n, read_buffer(*n));
      continue;
    }
    srcs.clear();
    for (auto& s : n->src) srcs.push_back(&vals.at(s.get()));
    Array v = eval_node(*n, srcs);
    for (auto& s : n->src)  // free values nobody needs any more
      if (--uses[s.get()] == 0) vals.erase(s.get());
    vals.emplace(n, std::move(v));
  }
  std::vector<Array> out;
  out.reserve(roots.size());
  for (auto& r : roots) out.push_back(vals.at(r.get()));
  return out;
}

Array evaluate(const NodeRef& n, bool use_realized) {
  return std::move(evaluate(std::vector<NodeRef>{n}, use_realized)[0]);
}

}  // namespace kiln::ref
