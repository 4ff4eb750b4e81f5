// Checked construction of tensor-level nodes: casts, broadcasting, reductions.
#include "frontend/graph.h"

#include <algorithm>

namespace kiln::frontend {

void fail(const std::string& op, const std::string& msg) { throw Error("kiln." + op + ": " + msg); }

int64_t norm_dim(const std::string& op, int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n)
    fail(op, "dim " + std::to_string(d) + " out of range for a tensor with " + std::to_string(ndim) +
                 " dims (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
  return d < 0 ? d + n : d;
}

NodeRef cast(const NodeRef& x, DType t) {
  if (x->dtype == t) return x;
  return ir::make(Op::CAST, t, x->shape, {x});
}

int64_t check_shape(const std::string& op, const Shape& s) {
  for (auto d : s)
    if (d < 0) fail(op, "negative dimension in shape " + shape_str(s));
  std::optional<int64_t> n = ir::checked_numel(s);
  if (!n) fail(op, "shape " + shape_str(s) + " has more elements than int64 can count");
  return *n;
}

NodeRef reshape(const NodeRef& x, const Shape& s) {
  if (x->shape == s) return x;
  return ir::make(Op::RESHAPE, x->dtype, s, {x});
}

NodeRef expand(const NodeRef& x, const Shape& s) {
  if (x->shape == s) return x;
  if (x->shape.size() > s.size())
    fail("expand", "cannot expand " + shape_str(x->shape) + " to " + shape_str(s) + ": fewer dims");
  Shape padded(s.size() - x->shape.size(), 1);
  padded.insert(padded.end(), x->shape.begin(), x->shape.end());
  for (size_t i = 0; i < s.size(); i++)
    if (padded[i] != s[i] && padded[i] != 1)
      fail("expand", "cannot expand " + shape_str(x->shape) + " to " + shape_str(s) + ": dim " +
                         std::to_string(i) + " has size " + std::to_string(padded[i]) + ", not 1");
  check_shape("expand", s);
  NodeRef r = reshape(x, padded);
  if (padded == s) return r;
  return ir::make(Op::EXPAND, x->dtype, s, {r});
}

NodeRef full(const Shape& s, double v, DType t) { return ir::const_float(v, t, s); }
NodeRef full(const Shape& s, const Scalar& v, DType t) {
  if (!is_float(t) && v.kind != Scalar::Kind::Float) return ir::const_int(v.i, t, s);
  return ir::const_float(v.v, t, s);
}

NodeRef ewise(Op op, std::vector<NodeRef> src, DType out) {
  Shape s = src.at(0)->shape;
  return ir::make(op, out, s, std::move(src));
}

NodeRef binary(const std::string& name, Op op, NodeRef a, NodeRef b) {
  Shape s = broadcast_shapes(a->shape, b->shape, name.c_str());
  if (a->dtype != b->dtype)
    fail(name, "dtypes differ: " + to_string(a->dtype) + " and " + to_string(b->dtype));
  DType out = ir::is_comparison(op) ? DType::Bool : a->dtype;
  return ir::make(op, out, s, {expand(a, s), expand(b, s)});
}

NodeRef reduce(Op rop, const NodeRef& x, std::vector<int64_t> axes) {
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Shape s = x->shape;
  std::vector<int64_t> arg{static_cast<int64_t>(rop)};
  for (auto a : axes)
    if (s[a] != 1 || (!x->sym.empty() && x->sym[a])) {  // reducing a size-1 axis is the identity
      s[a] = 1;
      arg.push_back(a);
    }
  if (arg.size() == 1) return x;
  return ir::make(Op::REDUCE, x->dtype, s, {x}, arg);
}

}  // namespace kiln::frontend

namespace kiln {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; i++) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      frontend::fail(op, "shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast: dim " +
                             std::to_string(i) + " is " + std::to_string(da) + " vs " + std::to_string(db));
    r[i] = da == 1 ? db : da;
  }
  return r;
}

}  // namespace kiln
