// Shape ops built from views: split/chunk/unbind, repeat/tile, roll, narrow, reflect/replicate
// padding, and the several-tensor ops cat, stack, vstack and hstack.
#include <algorithm>

#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::fail;
using frontend::norm_dim;

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); i++) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

// x zero-padded by `before` and `after` along d.
Tensor place(const Tensor& x, int64_t d, int64_t before, int64_t after) {
  std::vector<int64_t> pads(static_cast<size_t>(2 * (x.dim() - d)), 0);
  pads[pads.size() - 2] = before;
  pads[pads.size() - 1] = after;
  return x.pad(pads);
}

// One side of reflect/replicate padding along d: `p` elements before (front) or after the data.
Tensor edge(const Tensor& x, int64_t d, int64_t p, bool front, bool reflect) {
  int64_t n = x.size(d);
  if (reflect) return front ? x.slice(d, 1, p + 1).flip({d}) : x.slice(d, n - 1 - p, n - 1).flip({d});
  Tensor e = front ? x.slice(d, 0, 1) : x.slice(d, n - 1, n);
  Shape s = e.shape();
  s[d] = p;
  return e.expand(s);
}

Tensor atleast(const Tensor& t, int64_t nd) {
  if (t.dim() >= nd) return t;
  if (t.dim() == 0) return t.reshape(Shape(static_cast<size_t>(nd), 1));
  return t.unsqueeze(0);  // 1-D to 2-D
}

}  // namespace

std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const {
  int64_t d = norm_dim("split", dim, this->dim());
  if (this->dim() == 0) fail("split", "cannot split a 0-D tensor");
  int64_t n = shape()[d];
  if (size <= 0 && !(size == 0 && n == 0))
    fail("split", "split size must be positive, got " + std::to_string(size) + " for dim " +
                      std::to_string(d) + " of shape " + shape_str(shape()));
  if (n == 0) return {*this};
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < n; s += size) sizes.push_back(std::min(size, n - s));
  return split(sizes, d);
}

std::vector<Tensor> Tensor::split(std::vector<int64_t> sizes, int64_t dim) const {
  if (this->dim() == 0) fail("split", "cannot split a 0-D tensor");
  int64_t d = norm_dim("split", dim, this->dim());
  int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) fail("split", "negative split size in " + list_str(sizes));
    if (__builtin_add_overflow(total, s, &total))
      fail("split", "split sizes " + list_str(sizes) + " add up to more than int64 can count");
  }
  if (total != shape()[d])
    fail("split", "split sizes " + list_str(sizes) + " add up to " + std::to_string(total) + ", but dim " +
                      std::to_string(d) + " of shape " + shape_str(shape()) + " has size " +
                      std::to_string(shape()[d]));
  std::vector<Tensor> r;
  int64_t at = 0;
  for (auto s : sizes) {
    r.push_back(slice(d, at, at + s));
    at += s;
  }
  return r;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  if (chunks <= 0) fail("chunk", "number of chunks must be positive, got " + std::to_string(chunks));
  if (this->dim() == 0) fail("chunk", "cannot chunk a 0-D tensor");
  int64_t d = norm_dim("chunk", dim, this->dim());
  int64_t n = shape()[d];
  if (n == 0) return split(std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);  // as PyTorch
  return split((n - 1) / chunks + 1, d);
}

std::vector<Tensor> Tensor::unbind(int64_t dim) const {
  if (this->dim() == 0) fail("unbind", "cannot unbind a 0-D tensor");
  int64_t d = norm_dim("unbind", dim, this->dim());
  std::vector<Tensor> r;
  for (int64_t i = 0; i < shape()[d]; i++) r.push_back(slice(d, i, i + 1).squeeze(d));
  return r;
}

Tensor Tensor::unflatten(int64_t dim, Shape sizes) const {
  if (this->dim() == 0) fail("unflatten", "cannot unflatten a 0-D tensor");
  int64_t d = norm_dim("unflatten", dim, this->dim());
  if (sizes.empty()) fail("unflatten", "sizes must not be empty");
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); i++) {
    if (sizes[i] == -1 && infer < 0)
      infer = static_cast<int64_t>(i);
    else if (sizes[i] < 0)
      fail("unflatten", "invalid sizes " + shape_str(sizes) + " (one -1 at most)");
    else if (__builtin_mul_overflow(known, sizes[i], &known))
      fail("unflatten", "sizes " + shape_str(sizes) + " have more elements than int64 can count");
  }
  int64_t n = shape()[d];
  if (infer >= 0) {
    if (known == 0 || n % known)
      fail("unflatten", "cannot infer -1 in " + shape_str(sizes) + " for dim " + std::to_string(d) +
                            " of size " + std::to_string(n));
    sizes[infer] = n / known;
  } else if (known != n) {
    fail("unflatten", "sizes " + shape_str(sizes) + " do not multiply to the size " + std::to_string(n) +
                          " of dim " + std::to_string(d) + " of shape " + shape_str(shape()));
  }
  Shape s(shape().begin(), shape().begin() + d);
  s.insert(s.end(), sizes.begin(), sizes.end());
  s.insert(s.end(), shape().begin() + d + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::repeat(std::vector<int64_t> times) const {
  if (static_cast<int64_t>(times.size()) < dim())
    fail("repeat",
         "needs at least one count per dim: " + list_str(times) + " for shape " + shape_str(shape()));
  for (auto t : times)
    if (t < 0) fail("repeat", "negative count in " + list_str(times));
  Shape s(times.size() - static_cast<size_t>(dim()), 1);
  s.insert(s.end(), shape().begin(), shape().end());
  // (1, s0, 1, s1, ...) expanded to (t0, s0, t1, s1, ...) and merged
  Shape split, big, out;
  for (size_t i = 0; i < s.size(); i++) {
    split.insert(split.end(), {1, s[i]});
    big.insert(big.end(), {times[i], s[i]});
  }
  if (!ir::checked_numel(big))
    fail("repeat", list_str(times) + " repeats of shape " + shape_str(shape()) +
                       " make more elements than int64 can count");
  for (size_t i = 0; i < s.size(); i++) out.push_back(times[i] * s[i]);
  return reshape(split).expand(big).reshape(out);
}

Tensor Tensor::tile(std::vector<int64_t> times) const {
  if (static_cast<int64_t>(times.size()) < dim()) times.insert(times.begin(), dim() - times.size(), 1);
  return repeat(times);
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  if (repeats < 0) fail("repeat_interleave", "repeats must be >= 0, got " + std::to_string(repeats));
  if (!dim) return reshape({-1}).repeat_interleave(repeats, 0);
  if (this->dim() == 0) return reshape({1}).repeat_interleave(repeats, 0);
  int64_t d = norm_dim("repeat_interleave", *dim, this->dim());
  Shape big = shape(), out = shape();
  big.insert(big.begin() + d + 1, repeats);
  frontend::check_shape("repeat_interleave", big);
  out[d] *= repeats;
  return unsqueeze(d + 1).expand(big).reshape(out);
}

Tensor Tensor::roll(std::vector<int64_t> shifts, std::vector<int64_t> dims) const {
  if (dims.empty()) {
    if (shifts.size() != 1) fail("roll", "without dims, give exactly one shift, got " + list_str(shifts));
    return reshape({-1}).roll(shifts, {0}).reshape(shape());
  }
  if (shifts.size() != dims.size())
    fail("roll", "shifts " + list_str(shifts) + " and dims " + list_str(dims) + " differ in length");
  Tensor r = *this;
  for (size_t i = 0; i < dims.size(); i++) {
    int64_t d = norm_dim("roll", dims[i], dim());
    if (dim() == 0) continue;
    int64_t n = shape()[d];
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    r = cat({r.slice(d, n - s, n), r.slice(d, 0, n - s)}, d);
  }
  return r;
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  if (this->dim() == 0) fail("narrow", "cannot narrow a 0-D tensor");
  int64_t d = norm_dim("narrow", dim, this->dim());
  int64_t n = shape()[d];
  if (start < -n || start > n)
    fail("narrow", "start " + std::to_string(start) + " is out of range for dim " + std::to_string(d) +
                       " of size " + std::to_string(n));
  if (start < 0) start += n;
  if (length < 0 || length > n - start)
    fail("narrow", "start " + std::to_string(start) + " + length " + std::to_string(length) +
                       " exceeds dim " + std::to_string(d) + " of size " + std::to_string(n));
  return slice(d, start, start + length);
}

Tensor Tensor::pad(std::vector<int64_t> pads, const std::string& mode, double value) const {
  if (mode == "constant") return pad(std::move(pads), value);
  bool reflect = mode == "reflect";
  if (!reflect && mode != "replicate")
    fail("pad", "unknown mode '" + mode + "' (constant, reflect or replicate)");
  if (pads.size() % 2 || static_cast<int64_t>(pads.size() / 2) > dim())
    fail("pad", std::to_string(pads.size()) + " pad values for a tensor of shape " + shape_str(shape()) +
                    " (need pairs, at most 2 per dim)");
  Tensor r = *this;
  for (size_t p = 0; p < pads.size() / 2; p++) {
    int64_t d = dim() - 1 - static_cast<int64_t>(p);
    int64_t before = pads[2 * p], after = pads[2 * p + 1], n = shape()[d];
    if (before < 0 || after < 0) fail("pad", "negative padding " + list_str(pads) + " is not supported");
    if (!before && !after) continue;
    if (reflect && (before >= n || after >= n))
      fail("pad", "reflect padding " + list_str(pads) + " must be smaller than the padded dim " +
                      std::to_string(d) + " of shape " + shape_str(shape()));
    if (!reflect && n == 0)
      fail("pad",
           "replicate padding of the empty dim " + std::to_string(d) + " of shape " + shape_str(shape()));
    std::vector<Tensor> parts;
    if (before) parts.push_back(edge(r, d, before, true, reflect));
    parts.push_back(r);
    if (after) parts.push_back(edge(r, d, after, false, reflect));
    r = cat(parts, d);
  }
  return r;
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) fail("cat", "needs at least one tensor");
  // as PyTorch, 1-D empty tensors of shape (0,) are skipped whatever the others' shapes
  std::vector<Tensor> parts;
  DType t = ts[0].dtype();
  for (size_t i = 0; i < ts.size(); i++) {
    t = promote_types(t, ts[i].dtype());
    if (ts[i].dim() == 0)
      fail("cat", "zero-dimensional tensor " + std::to_string(i) + " cannot be concatenated");
    if (ts[i].shape() != Shape{0}) parts.push_back(ts[i]);
  }
  if (parts.empty()) return ts[0].to(t);
  int64_t d = norm_dim("cat", dim, parts[0].dim());
  Shape s = parts[0].shape();
  s[d] = 0;
  for (size_t i = 0; i < parts.size(); i++) {
    const Shape& p = parts[i].shape();
    bool ok = p.size() == s.size();
    for (size_t k = 0; ok && k < p.size(); k++) ok = static_cast<int64_t>(k) == d || p[k] == s[k];
    if (!ok)
      fail("cat", "tensor " + std::to_string(i) + " has shape " + shape_str(p) + ", expected " +
                      shape_str(parts[0].shape()) + " in every dim but " + std::to_string(d));
    if (__builtin_add_overflow(s[d], p[d], &s[d]))
      fail("cat", "the sizes in dim " + std::to_string(d) + " of the " + std::to_string(parts.size()) +
                      " tensors (the first of shape " + shape_str(parts[0].shape()) +
                      ") add up to more than int64 can count");
  }
  frontend::check_shape("cat", s);
  // each nonempty part padded into place; a padded mask selects it
  Tensor r;
  int64_t at = 0;
  for (auto& p : parts) {
    int64_t n = p.size(d);
    if (n == 0) continue;
    Tensor placed = place(p.to(t), d, at, s[d] - at - n);
    if (!r.defined()) {
      r = placed;
    } else {
      Tensor mask = place(full(Shape(p.shape()), true, DType::Bool), d, at, s[d] - at - n);
      r = where(mask, placed, r);
    }
    at += n;
  }
  if (!r.defined()) return zeros(s, {.dtype = t});
  return r;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) fail("stack", "needs at least one tensor");
  int64_t d = norm_dim("stack", dim, ts[0].dim() + 1);
  Shape out = ts[0].shape();
  out.insert(out.begin() + d, static_cast<int64_t>(ts.size()));
  frontend::check_shape("stack", out);
  std::vector<Tensor> u;
  for (size_t i = 0; i < ts.size(); i++) {
    if (ts[i].shape() != ts[0].shape())
      fail("stack", "all tensors need one shape, got " + shape_str(ts[0].shape()) + " and " +
                        shape_str(ts[i].shape()) + " (tensor " + std::to_string(i) + ")");
    u.push_back(ts[i].unsqueeze(d));
  }
  return cat(u, d);
}

Tensor vstack(const std::vector<Tensor>& ts) {
  if (ts.empty()) fail("vstack", "needs at least one tensor");
  std::vector<Tensor> u;
  for (auto& t : ts) u.push_back(atleast(t, 2));
  return cat(u, 0);
}

Tensor hstack(const std::vector<Tensor>& ts) {
  if (ts.empty()) fail("hstack", "needs at least one tensor");
  std::vector<Tensor> u;
  for (auto& t : ts) u.push_back(atleast(t, 1));
  return cat(u, u[0].dim() == 1 ? 0 : 1);
}

}  // namespace kiln
