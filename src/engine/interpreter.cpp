// Reference interpreter: evaluates tensor-level graphs straight from the IR, element by element,
// implementing the "Tensor-level semantics" comment in ir/ops.h exactly.
#include "engine/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/attention_layout.h"
#include "ir/layer_norm_parts.h"
#include "ir/scalar_alu.h"
#include "ir/symbolic.h"
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

using ir::int_to_double;
using ir::round_to;
int64_t wrap(int64_t v, DType t) { return ir::wrap_int(v, t); }

ir::Scalar element(const Array& a, int64_t k) {
  return is_float(a.dtype) ? ir::Scalar{a.dtype, a.f[k], 0} : ir::Scalar{a.dtype, 0, a.i[k]};
}

// CAST of element k of a to out's dtype, written to out[k].
void cast_elem(const Array& a, int64_t k, Array& out) {
  ir::Scalar r;
  ir::Scalar x = element(a, k);
  ir::eval_alu(Op::CAST, out.dtype, {&x, 1}, r);
  if (is_float(out.dtype))
    out.f[k] = r.f;
  else
    out.i[k] = r.i;
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

// A part of attention (ir/attention_layout.h) over equal batch dims, in f64, rounded once.
Array eval_attention(const Node& n, const std::vector<const Array*>& s) {
  auto part = ir::attention_part(n.arg);
  if (static_cast<int>(s.size()) != ir::attention_sources(part)) fail(n, "ATTENTION has the wrong sources");
  const Array &q = *s[0], &k = *s[1], &v = *s[2];
  size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r)
    fail(n, "ATTENTION needs sources of one rank >= 2");
  int64_t tq = q.shape[r - 2], tk = k.shape[r - 2], d = q.shape[r - 1], dv = v.shape[r - 1];
  Array out = make_array(n.shape, n.dtype);
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; i++) batch *= q.shape[i];
  bool causal = n.arg.at(0) != 0;
  std::vector<double> p(static_cast<size_t>(tk)), ds(static_cast<size_t>(tk));
  std::vector<double> acc(static_cast<size_t>(tk * (d + dv)));
  auto dot = [](const double* a, const double* b, int64_t len) {
    double t = 0;
    for (int64_t c = 0; c < len; c++) t += a[c] * b[c];
    return t;
  };
  for (int64_t b = 0; b < batch; b++) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < tq; i++) {
      int64_t keys = causal ? std::min(tk, i + 1) : tk;
      const double* qi = &q.f[(b * tq + i) * d];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < keys; j++)
        mx = std::max(mx, p[j] = dot(qi, &k.f[(b * tk + j) * d], d) * n.fval);
      for (int64_t j = 0; j < keys; j++) sum += std::exp(p[j] - mx);
      double lse = keys == 0 ? -INFINITY : mx + std::log(sum);
      if (part == ir::AttentionPart::Lse) {
        out.f[b * tq + i] = round_to(lse, n.dtype);
        continue;
      }
      if (part == ir::AttentionPart::Out) {
        for (int64_t j = 0; j < keys; j++) p[j] = std::exp(p[j] - mx) / sum;
        for (int64_t c = 0; c < dv; c++) {
          double o = 0;
          for (int64_t j = 0; j < keys; j++) o += p[j] * v.f[(b * tk + j) * dv + c];
          out.f[(b * tq + i) * dv + c] = round_to(o, n.dtype);
        }
        continue;
      }
      // the gradients, with the given lse and delta
      const double* doi = &s[3]->f[(b * tq + i) * dv];
      double given_lse = s[4]->f[b * tq + i], delta = s[5]->f[b * tq + i];
      for (int64_t j = 0; j < keys; j++) {
        p[j] = std::exp(p[j] - given_lse);
        ds[j] = p[j] * (dot(doi, &v.f[(b * tk + j) * dv], dv) - delta);
      }
      if (part == ir::AttentionPart::Dq) {
        for (int64_t c = 0; c < d; c++) {
          double g = 0;
          for (int64_t j = 0; j < keys; j++) g += ds[j] * k.f[(b * tk + j) * d + c];
          out.f[(b * tq + i) * d + c] = round_to(g * n.fval, n.dtype);
        }
        continue;
      }
      for (int64_t j = 0; j < keys; j++) {
        double* row = &acc[static_cast<size_t>(j * (d + dv))];
        for (int64_t c = 0; c < d; c++) row[c] += ds[j] * qi[c] * n.fval;
        for (int64_t c = 0; c < dv; c++) row[d + c] += p[j] * doi[c];
      }
    }
    if (part == ir::AttentionPart::Dkv)
      for (int64_t e = 0; e < tk * (d + dv); e++)
        out.f[b * tk * (d + dv) + e] = round_to(acc[static_cast<size_t>(e)], n.dtype);
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
  int64_t o = 0;       // output flat index of idx
  ir::Scalar x[2], r;  // the accumulator and the next value, combined by the scalar ALU
  for (int64_t k = 0; k < nin; k++) {
    if (fl) {
      x[0] = {t, out.f[o], 0};
      x[1] = {t, in.f[k], 0};
      ir::eval_alu(rop, t, x, r);
      out.f[o] = r.f;
    } else {
      x[0] = {t, 0, out.i[o]};
      x[1] = {t, 0, wrap(in.i[k], t)};
      ir::eval_alu(rop, t, x, r);
      out.i[o] = r.i;
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

// Every element through the scalar ALU that constant folding uses too (ir/scalar_alu.h).
Array eval_elementwise(const Node& n, const std::vector<const Array*>& s) {
  const size_t want = is_unary(n.op) ? 1 : is_binary(n.op) ? 2 : 3;
  if (s.size() != want) fail(n, "wrong number of sources");
  std::vector<DType> types;
  for (auto* a : s) {
    if (a->shape != n.shape)
      fail(n, "elementwise source of shape " + shape_str(a->shape) + " (no implicit broadcast)");
    types.push_back(a->dtype);
  }
  if (const char* why = ir::alu_type_error(n.op, n.dtype, types)) fail(n, why);
  Array out = make_array(n.shape, n.dtype);
  const int64_t ne = out.numel();
  const bool fl = is_float(n.dtype);
  std::vector<ir::Scalar> x(s.size());
  ir::Scalar r;
  for (int64_t k = 0; k < ne; k++) {
    for (size_t j = 0; j < s.size(); j++) x[j] = element(*s[j], k);
    if (const char* why = ir::eval_alu(n.op, n.dtype, x, r)) fail(n, why);
    if (fl)
      out.f[k] = r.f;
    else
      out.i[k] = r.i;
  }
  return out;
}

// A part of layer norm (ir/layer_norm_parts.h) over rows of a 2D input, in f64, rounded once. The
// backward's statistics are its mean and rstd sources, as the kernels read them.
Array eval_layer_norm(const Node& n, const std::vector<const Array*>& s) {
  auto part = ir::layer_norm_part(n.arg);
  if (static_cast<int>(s.size()) != ir::layer_norm_sources(part)) fail(n, "LAYER_NORM has the wrong sources");
  const bool fwd = ir::is_forward(part);
  const Array& x = fwd ? *s[0] : *s[1];
  const Array& w = fwd ? *s[1] : *s[2];
  if (x.shape.size() != 2 || w.numel() != x.shape[1]) fail(n, "LAYER_NORM needs x (N, C) and weight (C)");
  const int64_t N = x.shape[0], C = x.shape[1];
  Array out = make_array(n.shape, n.dtype);
  std::vector<double> dw(static_cast<size_t>(C)), db(static_cast<size_t>(C));
  for (int64_t i = 0; i < N; i++) {
    const double* xi = &x.f[i * C];
    double mean = 0, var = 0;
    if (fwd) {
      for (int64_t c = 0; c < C; c++) mean += xi[c];
      mean /= static_cast<double>(C);
      for (int64_t c = 0; c < C; c++) var += (xi[c] - mean) * (xi[c] - mean);
    }
    const double rstd = fwd ? 1 / std::sqrt(var / static_cast<double>(C) + n.fval) : s[4]->f[i];
    if (!fwd) mean = s[3]->f[i];
    switch (part) {
      case ir::LayerNormPart::Y:
        for (int64_t c = 0; c < C; c++)
          out.f[i * C + c] = round_to((xi[c] - mean) * rstd * w.f[c] + s[2]->f[c], n.dtype);
        break;
      case ir::LayerNormPart::Mean: out.f[i] = round_to(mean, n.dtype); break;
      case ir::LayerNormPart::Rstd: out.f[i] = round_to(rstd, n.dtype); break;
      default: {
        const double* dy = &s[0]->f[i * C];
        double g_mean = 0, gx_mean = 0;
        for (int64_t c = 0; c < C; c++) {
          const double xhat = (xi[c] - mean) * rstd, g = dy[c] * w.f[c];
          g_mean += g;
          gx_mean += g * xhat;
          dw[static_cast<size_t>(c)] += dy[c] * xhat;
          db[static_cast<size_t>(c)] += dy[c];
        }
        g_mean /= static_cast<double>(C);
        gx_mean /= static_cast<double>(C);
        if (part == ir::LayerNormPart::Dx)
          for (int64_t c = 0; c < C; c++) {
            const double xhat = (xi[c] - mean) * rstd;
            out.f[i * C + c] = round_to(rstd * (dy[c] * w.f[c] - g_mean - xhat * gx_mean), n.dtype);
          }
      }
    }
  }
  if (part == ir::LayerNormPart::Dweight || part == ir::LayerNormPart::Dbias)
    for (int64_t c = 0; c < C; c++)
      out.f[c] = round_to((part == ir::LayerNormPart::Dweight ? dw : db)[static_cast<size_t>(c)], n.dtype);
  return out;
}

// dst with slices index[t] along dim replaced by src's slices t, in order (a later duplicate wins);
// an index out of range writes nothing.
Array eval_index_copy(const Node& n, const std::vector<const Array*>& s) {
  if (s.size() != 3 || n.arg.size() != 1) fail(n, "INDEX_COPY needs dst, index, src and arg {dim}");
  const Array &dst = *s[0], &index = *s[1], &src = *s[2];
  const size_t d = static_cast<size_t>(n.arg[0]);
  if (d >= dst.shape.size() || index.shape.size() != 1 || src.shape.size() != dst.shape.size() ||
      src.shape[d] != index.shape[0] || is_float(index.dtype))
    fail(n, "INDEX_COPY shapes do not fit");
  Array out = dst;
  int64_t inner = 1, outer = 1;
  for (size_t k = d + 1; k < dst.shape.size(); k++) inner *= dst.shape[k];
  for (size_t k = 0; k < d; k++) outer *= dst.shape[k];
  const int64_t n_dst = dst.shape[d], m = index.shape[0];
  for (int64_t t = 0; t < m; t++) {
    int64_t j = index.i[static_cast<size_t>(t)];
    if (j < 0 || j >= n_dst) continue;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t e = 0; e < inner; e++) {
        size_t to = static_cast<size_t>((o * n_dst + j) * inner + e),
               from = static_cast<size_t>((o * m + t) * inner + e);
        if (is_float(out.dtype))
          out.f[to] = src.f[from];
        else
          out.i[to] = src.i[from];
      }
  }
  return out;
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
    case Op::ATTENTION: return eval_attention(n, s);
    case Op::LAYER_NORM: return eval_layer_norm(n, s);
    case Op::INDEX_COPY: return eval_index_copy(n, s);
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
  ir::Bindings vars = ir::vars_in_use() ? ir::bind_vars(order) : ir::Bindings{};
  for (auto& ref : order) {
    const Node* n = ref.get();
    if (!needed.count(n)) continue;
    if (from_buffer(n)) {
      vals.emplace(n, read_buffer(*n));
      continue;
    }
    if (n->op == Op::VAR) {  // a symbolic size: its value in this graph
      Array a = make_array({}, DType::I64);
      a.i[0] = ir::eval_index(ref, vars);
      vals.emplace(n, std::move(a));
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
