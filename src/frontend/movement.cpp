// Movement ops: views that never copy (they become index arithmetic when scheduled).
#include <algorithm>

#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::fail;
using frontend::norm_dim;
using ir::NodeRef;
using ir::Op;

Tensor Tensor::reshape(Shape s) const {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == -1) {
      if (infer >= 0) fail("reshape", "only one dim may be -1, got " + shape_str(s));
      infer = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      fail("reshape", "invalid size " + std::to_string(s[i]) + " in " + shape_str(s));
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      fail("reshape", "shape " + shape_str(s) + " has more elements than int64 can count");
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      fail("reshape", "cannot infer -1 in " + shape_str(s) + " for a tensor of shape " + shape_str(shape()) +
                          " (" + std::to_string(numel()) + " elements)");
    s[infer] = numel() / known;
    known *= s[infer];
  }
  if (known != numel())
    fail("reshape", "shape " + shape_str(s) + " (" + std::to_string(known) +
                        " elements) is invalid for a tensor of shape " + shape_str(shape()) + " (" +
                        std::to_string(numel()) + " elements)");
  return Tensor(frontend::reshape(node(), s));
}

Tensor Tensor::permute(std::vector<int64_t> perm) const {
  if (static_cast<int64_t>(perm.size()) != dim())
    fail("permute", "permutation has " + std::to_string(perm.size()) + " dims, tensor of shape " +
                        shape_str(shape()) + " has " + std::to_string(dim()));
  std::vector<bool> seen(perm.size());
  Shape s(perm.size());
  for (size_t i = 0; i < perm.size(); i++) {
    perm[i] = norm_dim("permute", perm[i], dim());
    if (seen[perm[i]]) fail("permute", "dim " + std::to_string(perm[i]) + " repeats in the permutation");
    seen[perm[i]] = true;
    s[i] = shape()[perm[i]];
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); i++) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return *this;
  return Tensor(ir::make(Op::PERMUTE, dtype(), s, {node()}, perm));
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> perm(dim());
  for (int64_t i = 0; i < dim(); i++) perm[i] = i;
  std::swap(perm[norm_dim("transpose", d0, dim())], perm[norm_dim("transpose", d1, dim())]);
  return permute(perm);
}

Tensor Tensor::expand(Shape s) const {
  int64_t off = static_cast<int64_t>(s.size()) - dim();
  for (size_t i = 0; i < s.size(); i++)
    if (s[i] == -1) {
      if (static_cast<int64_t>(i) < off)
        fail("expand", "-1 is not allowed for a new leading dim in " + shape_str(s));
      s[i] = shape()[i - off];
    }
  return Tensor(frontend::expand(node(), s));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = norm_dim("unsqueeze", d, dim() + 1);
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return reshape(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = norm_dim("squeeze", d, dim());
  if (dim() == 0 || shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return reshape(s);
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (auto x : shape())
    if (x != 1) s.push_back(x);
  return reshape(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = norm_dim("flatten", start, dim());
  end = norm_dim("flatten", end, dim());
  Shape s(shape().begin(), shape().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; i++) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::pad(std::vector<int64_t> pads, double value) const {
  if (pads.size() % 2 || static_cast<int64_t>(pads.size() / 2) > dim())
    fail("pad", std::to_string(pads.size()) + " pad values for a tensor of shape " + shape_str(shape()) +
                    " (need pairs, at most 2 per dim)");
  std::vector<int64_t> arg(2 * dim(), 0);
  Shape s = shape();
  bool any = false;
  for (size_t p = 0; p < pads.size() / 2; p++) {
    int64_t d = dim() - 1 - static_cast<int64_t>(p);
    if (pads[2 * p] < 0 || pads[2 * p + 1] < 0) fail("pad", "negative padding is not supported; use slice");
    arg[2 * d] = pads[2 * p];
    arg[2 * d + 1] = pads[2 * p + 1];
    if (__builtin_add_overflow(s[d], pads[2 * p], &s[d]) ||
        __builtin_add_overflow(s[d], pads[2 * p + 1], &s[d]))
      fail("pad", "padding (" + std::to_string(pads[2 * p]) + ", " + std::to_string(pads[2 * p + 1]) +
                      ") of dim " + std::to_string(d) + " of shape " + shape_str(shape()) +
                      " gives a size int64 cannot hold");
    any |= pads[2 * p] || pads[2 * p + 1];
  }
  if (!any) return *this;
  frontend::check_shape("pad", s);
  Tensor padded(ir::make(Op::PAD, dtype(), s, {node()}, arg));
  if (value == 0) return padded;
  // PAD fills zeros; other values come from a padded mask
  Tensor mask(ir::make(Op::PAD, DType::Bool, s, {ir::const_int(1, DType::Bool, shape())}, arg));
  return where(mask, padded, full({}, value, dtype()));
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  d = norm_dim("slice", d, dim());
  if (step <= 0) fail("slice", "step must be positive, got " + std::to_string(step));
  int64_t n = shape()[d];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t b = start ? clampi(*start) : 0, e = end ? clampi(*end) : n;
  if (e < b) e = b;
  std::vector<int64_t> arg;
  for (int64_t i = 0; i < dim(); i++) {
    arg.push_back(i == d ? b : 0);
    arg.push_back(i == d ? e : shape()[i]);
  }
  Shape s = shape();
  s[d] = e - b;
  Tensor r = (b == 0 && e == n) ? *this : Tensor(ir::make(Op::SHRINK, dtype(), s, {node()}, arg));
  if (step == 1 || e - b <= 1) return r;
  int64_t m = (e - b - 1) / step + 1;  // elements kept
  if (m == 1) return r.slice(d, 0, 1);
  // stride by step: pad to a multiple of step, split the dim into (m, step), keep index 0 of step
  // (m >= 2, so step < e - b and the padded size is below 2 * (e - b))
  int64_t padded;
  if (__builtin_mul_overflow(m, step, &padded))
    fail("slice", "step " + std::to_string(step) + " over " + std::to_string(e - b) + " elements of dim " +
                      std::to_string(d) + " of shape " + shape_str(shape()) +
                      " needs more than int64 can count");
  std::vector<int64_t> pads(2 * (dim() - d), 0);
  pads[2 * (dim() - 1 - d) + 1] = padded - (e - b);
  r = r.pad(pads);
  Shape split = r.shape();
  split[d] = m;
  split.insert(split.begin() + d + 1, step);
  r = r.reshape(split).slice(d + 1, 0, 1);
  return r.squeeze(d + 1);
}

Tensor Tensor::index(std::vector<TensorIndex> idx) const {
  if (static_cast<int64_t>(idx.size()) > dim())
    fail("index", std::to_string(idx.size()) + " indices for a tensor of shape " + shape_str(shape()));
  Tensor r = *this;
  int64_t d = 0;
  for (auto& i : idx) {
    if (auto* k = std::get_if<int64_t>(&i)) {
      int64_t n = r.shape()[d];
      if (*k < -n || *k >= n)
        fail("index", "index " + std::to_string(*k) + " is out of bounds for dim " + std::to_string(d) +
                          " with size " + std::to_string(n));
      r = r.slice(d, *k, *k < 0 ? (*k + n + 1) : *k + 1).squeeze(d);
    } else {
      auto& s = std::get<Slice>(i);
      r = r.slice(d, s.start, s.stop, s.step);
      d++;
    }
  }
  return r;
}

Tensor Tensor::flip(std::vector<int64_t> dims) const {
  std::vector<int64_t> arg(dim(), 0);
  for (auto x : dims) {
    int64_t d = norm_dim("flip", x, dim());
    if (arg[d]) fail("flip", "dim " + std::to_string(d) + " appears more than once in the dims");
    arg[d] = 1;
  }
  bool any = false;
  for (int64_t i = 0; i < dim(); i++) {
    if (shape()[i] <= 1) arg[i] = 0;
    any |= arg[i] != 0;
  }
  if (!any) return *this;
  return Tensor(ir::make(Op::FLIP, dtype(), shape(), {node()}, arg));
}

}  // namespace kiln
