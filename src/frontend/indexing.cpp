// Indexing with index tensors (gather, scatter, index_select, ...), triangular masks and ordering
// (topk, sort), built as one-hot compares against an iota so they stay differentiable.
#include <algorithm>
#include <cmath>

#include "frontend/graph.h"
#include "kiln/autocast.h"
#include "kiln/debug.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::fail;
using frontend::norm_dim;

namespace {

Tensor zero(DType t) { return full({}, 0, t); }

// The index along dim d of a rank-`rank` tensor, as an i64 tensor broadcastable against it.
Tensor iota_along(int64_t n, int64_t d, int64_t rank) {
  Shape s(static_cast<size_t>(rank), 1);
  s[static_cast<size_t>(d)] = n;
  return arange(n).reshape(s);
}

void need_index(const char* op, const Tensor& index) {
  if (!is_int(index.dtype()))
    fail(op, "index must be an integer tensor, got " + to_string(index.dtype()) + " of shape " +
                 shape_str(index.shape()));
}

// Out-of-range indices select nothing (read 0, write nothing): never out of bounds. Under
// KILN_VALIDATE=1 they are reported instead, which needs the index values on the host.
void check_range(const char* op, const Tensor& index, int64_t n) {
  if (!settings().validate || index.numel() == 0) return;
  auto v = index.to_vector<int64_t>();
  for (size_t k = 0; k < v.size(); k++)
    if (v[k] < 0 || v[k] >= n)
      fail(op, "index " + std::to_string(v[k]) + " (element " + std::to_string(k) +
                   " of the index of shape " + shape_str(index.shape()) +
                   ") is out of range for a dim of size " + std::to_string(n) +
                   " (reported by KILN_VALIDATE=1; otherwise it selects nothing)");
}

// Sum over `axis` of the values where mask holds: with a one-hot mask this selects one value (or
// none: 0), exactly, and stays differentiable. The result is cast to `out`.
Tensor select_sum(const Tensor& mask, const Tensor& vals, int64_t axis, DType out, bool keepdim = false) {
  return where(mask, vals, zero(vals.dtype())).sum(axis, keepdim).to(out);
}

// Keeps the first sizes[k] entries of every dim.
Tensor shrink_to(const Tensor& x, const Shape& sizes) {
  Tensor r = x;
  for (int64_t k = 0; k < x.dim(); k++)
    if (sizes[k] < x.size(k)) r = r.slice(k, 0, sizes[k]);
  return r;
}

// Zero-pads the end of every dim up to `sizes`.
Tensor pad_to(const Tensor& x, const Shape& sizes) {
  std::vector<int64_t> pads;
  for (int64_t k = x.dim() - 1; k >= 0; k--) {
    pads.push_back(0);
    pads.push_back(sizes[k] - x.size(k));
  }
  return x.pad(pads);
}

std::string shapes_of(const Tensor& a, const Tensor& b) {
  return shape_str(a.shape()) + " and index of shape " + shape_str(b.shape());
}

// Shared checks and one-hot construction of scatter and scatter_add. Returns, in self's shape, the
// mask of written positions and the written values (last writer along d, or the sum of all writers).
struct Scattered {
  Tensor hit, val;
};
Scattered scatter_core(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                       const Tensor& src, bool add) {
  Autocast plain(std::nullopt);  // its one-hot sum keeps the source's dtype
  need_index(op, index);
  if (index.dim() != self.dim() || src.dim() != self.dim())
    fail(op, "self, index and src need the same number of dims, got shapes " + shape_str(self.shape()) +
                 ", " + shape_str(index.shape()) + " and " + shape_str(src.shape()));
  if (self.dim() == 0) {
    Scattered s = scatter_core(op, self.reshape({1}), 0, index.reshape({1}), src.reshape({1}), add);
    return {s.hit.defined() ? s.hit.reshape({}) : s.hit, s.val.reshape({})};
  }
  int64_t d = norm_dim(op, dim, self.dim());
  check_range(op, index, self.size(d));
  for (int64_t k = 0; k < self.dim(); k++)
    if (index.size(k) > src.size(k) || (k != d && index.size(k) > self.size(k)))
      fail(op, "index of shape " + shape_str(index.shape()) + " is larger than src " +
                   shape_str(src.shape()) + " or self " + shape_str(self.shape()) + " in dim " +
                   std::to_string(k));
  int64_t n = self.size(d), m = index.size(d), r = self.dim();
  Tensor sv = shrink_to(src, index.shape()).unsqueeze(d + 1);           // (.., m, 1, ..)
  Tensor mask = index.unsqueeze(d + 1) == iota_along(n, d + 1, r + 1);  // (.., m, n, ..)
  Shape region = index.shape();
  region[d] = n;
  Tensor hit, val;
  if (add) {
    val = where(mask, sv, zero(sv.dtype())).sum(d);
    // a kernel of its own, which the lowering turns into a scatter-add (one step per source element,
    // not one per source and target pair)
    if (val.dtype() == DType::F32 || val.dtype() == DType::F64) val = val.contiguous();
  } else {  // duplicates along d: the largest source position along d wins
    Tensor j = iota_along(m, d, r + 1);
    Tensor last = where(mask, j, full({}, -1, DType::I64)).max(d, true);  // (.., 1, n, ..)
    val = select_sum(mask & (j == last), sv, d, self.dtype());
    hit = (last >= 0).squeeze(d);
    if (m == 0) hit = full(region, false, DType::Bool);
    hit = pad_to(hit, self.shape());
  }
  if (m == 0) val = zeros(region, {.dtype = val.dtype()});
  return {hit, pad_to(val, self.shape())};
}

// Rank of every element along the last axis in sorted order (ties keep their index order; NaN is
// the largest value), as i64.
Tensor ranks(const Tensor& t, bool descending) {
  int64_t n = t.size(-1);
  Tensor a = t.unsqueeze(-1), b = t.unsqueeze(-2);  // element i: (.., n, 1); element j: (.., 1, n)
  Tensor before = descending ? b > a : b < a;       // j sorts strictly before i
  Tensor same = a == b;
  if (is_float(t.dtype())) {
    Tensor na = a != a, nb = b != b;
    before = before | (descending ? nb & ~na : na & ~nb);
    same = same | (na & nb);
  }
  Tensor j_first = arange(n).reshape({1, n}) < arange(n).reshape({n, 1});
  return (before | (same & j_first)).sum(-1);
}

// The first k elements along the last axis in sorted order, and their indices.
std::pair<Tensor, Tensor> ordered(const Tensor& t, int64_t k, bool descending) {
  int64_t n = t.size(-1);
  Tensor onehot = ranks(t, descending).unsqueeze(-1) == arange(k);  // (.., n, k)
  Tensor vals = select_sum(onehot, t.unsqueeze(-1), -2, t.dtype());
  Tensor idx = select_sum(onehot, arange(n).reshape({n, 1}), -2, DType::I64);
  return {vals, idx};
}

std::pair<Tensor, Tensor> ordered_along(const char* op, const Tensor& x, int64_t dim, int64_t k,
                                        bool descending) {
  int64_t d = norm_dim(op, dim, x.dim());
  if (x.dim() == 0) {
    auto [v, i] = ordered_along(op, x.reshape({1}), 0, k, descending);
    return {v.reshape({}), i.reshape({})};
  }
  int64_t n = x.size(d);
  if (k < 0 || k > n)
    fail(op, "k = " + std::to_string(k) + " is out of range for dim " + std::to_string(d) + " of size " +
                 std::to_string(n) + " (shape " + shape_str(x.shape()) + ")");
  auto [v, i] = ordered(x.transpose(d, -1), k, descending);
  return {v.transpose(d, -1), i.transpose(d, -1)};
}

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  if (x.dim() < 2) fail(op, "needs at least 2 dims, got shape " + shape_str(x.shape()));
  int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor off = arange(cols).reshape({1, cols}) - arange(rows).reshape({rows, 1});  // col - row
  Tensor keep = lower ? off <= Scalar(diagonal) : off >= Scalar(diagonal);
  return where(keep, x, zero(x.dtype()));
}

}  // namespace

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  need_index("gather", index);
  if (index.dim() != this->dim())
    fail("gather", "index needs the same number of dims as self, got self " + shapes_of(*this, index));
  if (this->dim() == 0) return reshape({1}).gather(0, index.reshape({1})).reshape({});
  int64_t d = norm_dim("gather", dim, this->dim());
  for (int64_t k = 0; k < this->dim(); k++)
    if (k != d && index.size(k) > size(k))
      fail("gather",
           "index is larger than self in dim " + std::to_string(k) + ": self " + shapes_of(*this, index));
  check_range("gather", index, size(d));
  Shape sizes = index.shape();
  sizes[d] = size(d);
  Tensor src = shrink_to(*this, sizes).unsqueeze(d);                                    // (.., 1, n, ..)
  Tensor mask = index.unsqueeze(d + 1) == iota_along(size(d), d + 1, this->dim() + 1);  // (.., m, n, ..)
  return select_sum(mask, src, d + 1, dtype());
}

Tensor Tensor::scatter(int64_t d, const Tensor& index, const Tensor& src) const {
  Scattered s = scatter_core("scatter", *this, d, index, src, false);
  return where(s.hit, s.val, *this);
}

Tensor Tensor::scatter_add(int64_t d, const Tensor& index, const Tensor& src) const {
  Scattered s = scatter_core("scatter_add", *this, d, index, src.to(dtype()), true);
  return (*this + s.val).to(dtype());
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  need_index("index_select", index);
  if (index.dim() > 1) fail("index_select", "index must be 0-D or 1-D, got self " + shapes_of(*this, index));
  if (this->dim() == 0) {
    Tensor r = reshape({1}).index_select(0, index);
    return index.dim() == 0 ? r.reshape({}) : r;
  }
  int64_t d = norm_dim("index_select", dim, this->dim());
  int64_t k = index.numel();
  Shape s = shape();
  s[d] = k;
  return gather(d, index.reshape({-1}).reshape(iota_along(k, d, this->dim()).shape()).expand(s));
}

Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& src, double alpha) const {
  need_index("index_add", index);
  if (index.dim() > 1) fail("index_add", "index must be 0-D or 1-D, got self " + shapes_of(*this, index));
  if (src.dim() != this->dim())
    fail("index_add",
         "src of shape " + shape_str(src.shape()) + " needs the dims of self " + shape_str(shape()));
  if (this->dim() == 0)
    return reshape({1}).index_add(0, index.reshape({-1}), src.reshape({1}), alpha).reshape({});
  int64_t d = norm_dim("index_add", dim, this->dim());
  int64_t k = index.numel();
  for (int64_t i = 0; i < this->dim(); i++)
    if ((i == d && src.size(i) != k) || (i != d && src.size(i) != size(i)))
      fail("index_add", "src of shape " + shape_str(src.shape()) + " does not fit self " +
                            shape_str(shape()) + " with " + std::to_string(k) + " indices along dim " +
                            std::to_string(d));
  Tensor v = src.to(dtype());
  if (alpha != 1) {
    if (is_float(dtype())) {
      v = v * alpha;
    } else {
      if (alpha != std::trunc(alpha) || dtype() == DType::Bool)
        fail("index_add",
             "alpha " + std::to_string(alpha) + " is not valid for a " + to_string(dtype()) + " tensor");
      v = (v * Scalar(static_cast<long long>(alpha))).to(dtype());
    }
  }
  Tensor idx = index.reshape({-1}).reshape(iota_along(k, d, this->dim()).shape()).expand(src.shape());
  return scatter_add(d, idx, v);
}

Tensor Tensor::take_along_dim(const Tensor& index, int64_t dim) const {
  need_index("take_along_dim", index);
  if (index.dim() != this->dim())
    fail("take_along_dim",
         "index needs the same number of dims as self, got self " + shapes_of(*this, index));
  if (this->dim() == 0) return gather(0, index);
  int64_t d = norm_dim("take_along_dim", dim, this->dim());
  Shape a = shape(), b = index.shape();
  a[d] = b[d] = 1;
  Shape s = broadcast_shapes(a, b, "take_along_dim");
  Shape xs = s, is = s;
  xs[d] = size(d);
  is[d] = index.size(d);
  return expand(xs).gather(d, index.expand(is));
}

Tensor Tensor::tril(int64_t diagonal) const { return triangle("tril", *this, diagonal, true); }
Tensor Tensor::triu(int64_t diagonal) const { return triangle("triu", *this, diagonal, false); }

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool largest) const {
  return ordered_along("topk", *this, d, k, largest);
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t d, bool descending) const {
  int64_t n = dim() == 0 ? 1 : size(norm_dim("sort", d, dim()));
  return ordered_along("sort", *this, d, n, descending);
}

Tensor Tensor::argsort(int64_t d, bool descending) const {
  int64_t n = dim() == 0 ? 1 : size(norm_dim("argsort", d, dim()));
  return ordered_along("argsort", *this, d, n, descending).second;
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  need_index("one_hot", index);
  if (num_classes < 0)
    fail("one_hot", "num_classes must be given and >= 0 (inferring it would read values), got " +
                        std::to_string(num_classes));
  check_range("one_hot", index, num_classes);
  return (index.unsqueeze(-1) == arange(num_classes)).to(DType::I64);
}

}  // namespace kiln
