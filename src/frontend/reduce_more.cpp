// Composite reductions: log_softmax, var/std, logsumexp, norm, all/any, argmax/argmin, max/min with
// indices and cumulative sum/product, written from the primitive reduce and elementwise ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::fail;
using frontend::norm_dim;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> norm_dims(const char* op, std::vector<int64_t> dims, int64_t ndim) {
  if (dims.empty())
    for (int64_t i = 0; i < ndim; i++) dims.push_back(i);
  for (auto& d : dims) d = norm_dim(op, d, ndim);
  for (size_t i = 0; i < dims.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (dims[i] == dims[j])
        fail(op, "dim " + std::to_string(dims[i]) + " appears more than once in the dims");
  if (ndim == 0) dims.clear();
  return dims;
}

// Half types compute in f32; other floats in themselves.
DType calc_of(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

void need_float(const char* op, const Tensor& x) {
  if (!is_float(x.dtype()))
    fail(op,
         "needs a floating point tensor, got " + to_string(x.dtype()) + " of shape " + shape_str(x.shape()));
}

// An order-reversing map (float: -x; int: ~x, which cannot overflow; bool: not).
Tensor invert(const Tensor& x) { return is_float(x.dtype()) ? -x : ~x; }

// The index along dim d of a rank-`rank` tensor, as an i64 tensor broadcastable against it.
Tensor iota_along(int64_t n, int64_t d, int64_t rank) {
  Shape s(static_cast<size_t>(rank), 1);
  s[static_cast<size_t>(d)] = n;
  return arange(n).reshape(s);
}

// Index of the first maximum along d (NaN counts as the largest value, as in PyTorch).
Tensor first_argmax(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) {
    Tensor r = first_argmax(op, x.reshape({-1}), 0, false);
    if (keepdim) return r.reshape(Shape(static_cast<size_t>(x.dim()), 1));
    return r;
  }
  int64_t d = norm_dim(op, *dim, x.dim());
  Tensor v = x.dim() == 0 ? x.reshape({1}) : x;
  int64_t n = v.size(d);
  if (n == 0)
    fail(op, "cannot take the " + std::string(op) + " of an empty dim (dim " + std::to_string(d) +
                 " of shape " + shape_str(x.shape()) + ")");
  Tensor m = v.max(d, true);
  Tensor hit = v == m;
  if (is_float(v.dtype())) hit = hit | (v != v);  // a NaN row's max is NaN: pick its first NaN
  // the first hit has the largest n - i
  Tensor score = where(hit, Scalar(n) - iota_along(n, d, v.dim()), full({}, 0, DType::I64));
  Tensor r = Scalar(n) - score.max(d, true);
  if (x.dim() == 0) return r.reshape({});
  return keepdim ? r : r.squeeze(d);
}

// Inclusive scan along d: out[i] = reduce over j <= i of x[j], with a triangular mask.
Tensor scan(const char* op, const Tensor& x, int64_t dim, bool product) {
  int64_t d = norm_dim(op, dim, x.dim());
  if (x.dim() == 0) return scan(op, x.reshape({1}), 0, product).reshape({});
  Tensor t = x.transpose(d, -1);  // (..., n)
  int64_t n = t.size(-1);
  Tensor i = arange(n).reshape({n, 1}), j = arange(n).reshape({1, n});
  Tensor keep = j <= i;          // (n, n): row i keeps j <= i
  Tensor win = t.unsqueeze(-2);  // (..., 1, n)
  DType out = is_float(x.dtype()) ? x.dtype() : DType::I64;
  Tensor id = full({}, product ? 1 : 0, out);
  Tensor masked = where(keep, win.to(out), id);           // (..., n, n)
  Tensor r = product ? masked.prod(-1) : masked.sum(-1);  // (..., n)
  return r.transpose(d, -1);
}

}  // namespace

Tensor Tensor::log_softmax(int64_t d) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).log_softmax(d);
  d = norm_dim("log_softmax", d, dim());
  DType out = float_result(dtype());
  Tensor x = to(calc_of(out));
  Tensor s = x - x.max(d, true).detach();  // the shift's gradient is exactly 0
  return (s - s.exp().sum(d, true).log()).to(out);
}

Tensor Tensor::var(std::vector<int64_t> dims, int64_t correction, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).var(dims, correction, keepdim);
  need_float("var", *this);
  auto nd = norm_dims("var", dims, dim());
  int64_t count = 1;
  for (auto a : nd) count *= shape()[a];
  Tensor x = to(calc_of(dtype()));
  Tensor dev = x - x.mean(nd, true);
  // PyTorch divides by max(0, N - correction): 0 gives inf or NaN
  double div = static_cast<double>(std::max<int64_t>(0, count - correction));
  Tensor r = (dev * dev).sum(nd, keepdim) / full({}, div, x.dtype());
  return r.to(dtype());
}

Tensor Tensor::std(std::vector<int64_t> dims, int64_t correction, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).std(dims, correction, keepdim);
  need_float("std", *this);
  return var(std::move(dims), correction, keepdim).to(calc_of(dtype())).sqrt().to(dtype());
}

Tensor Tensor::logsumexp(std::vector<int64_t> dims, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).logsumexp(dims, keepdim);
  auto nd = norm_dims("logsumexp", dims, dim());
  DType out = float_result(dtype());
  Tensor x = to(calc_of(out));
  Tensor m = x.max(nd, true).detach();  // d/dm of log(sum(exp(x - m))) + m is exactly 0
  // an infinite max shifts by 0: all -inf gives log(0) = -inf, any +inf gives inf
  m = where(m.abs() == kInf, full({}, 0.0, x.dtype()), m);
  Tensor r = (x - m).exp().sum(nd, true).log() + m;
  if (!keepdim) {
    Shape s;
    for (int64_t i = 0; i < dim(); i++)
      if (std::find(nd.begin(), nd.end(), i) == nd.end()) s.push_back(shape()[i]);
    r = r.reshape(s);
  }
  return r.to(out);
}

Tensor Tensor::norm(double p, std::vector<int64_t> dims, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).norm(p, dims, keepdim);
  need_float("norm", *this);
  auto nd = norm_dims("norm", dims, dim());
  Tensor x = to(calc_of(dtype()));
  Tensor a = x.abs();
  Tensor r;
  if (p == 2)
    r = (x * x).sum(nd, keepdim).sqrt();
  else if (p == 1)
    r = a.sum(nd, keepdim);
  else if (p == kInf)
    r = a.max(nd, keepdim);
  else if (p == -kInf)
    r = a.min(nd, keepdim);
  else if (p == 0)
    r = (x != 0.0).to(x.dtype()).sum(nd, keepdim);
  else if (std::isnan(p))
    fail("norm", "p must not be NaN");
  else
    r = a.pow(p).sum(nd, keepdim).pow(1.0 / p);
  return r.to(dtype());
}

Tensor Tensor::all(std::vector<int64_t> dims, bool keepdim) const {
  // counting the false elements keeps the empty case right (all of nothing is true)
  return to(DType::Bool).logical_not().sum(dims, keepdim) == 0;
}

Tensor Tensor::any(std::vector<int64_t> dims, bool keepdim) const {
  return to(DType::Bool).sum(dims, keepdim) != 0;
}

Tensor Tensor::argmax(std::optional<int64_t> d, bool keepdim) const {
  return first_argmax("argmax", *this, d, keepdim);
}

Tensor Tensor::argmin(std::optional<int64_t> d, bool keepdim) const {
  return first_argmax("argmin", invert(*this), d, keepdim);
}

std::pair<Tensor, Tensor> Tensor::max_with_indices(int64_t d, bool keepdim) const {
  Tensor i = first_argmax("max", *this, d, keepdim);
  return {max(d, keepdim), i};
}

std::pair<Tensor, Tensor> Tensor::min_with_indices(int64_t d, bool keepdim) const {
  Tensor i = first_argmax("min", invert(*this), d, keepdim);
  return {min(d, keepdim), i};
}

Tensor Tensor::cumsum(int64_t d) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).cumsum(d);
  return scan("cumsum", *this, d, false);
}
Tensor Tensor::cumprod(int64_t d) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).cumprod(d);
  return scan("cumprod", *this, d, true);
}

}  // namespace kiln
