// Sliding-window views from movement ops: stride and dilation become reshapes of a padded or
// repeated dim, so the view fuses into the reduce that consumes it.
#include "frontend/pool_window.h"

#include <utility>

#include "frontend/graph.h"

namespace kiln::frontend {

namespace {

Shape with(Shape s, int64_t p, std::initializer_list<int64_t> sizes, int64_t replaced = 1) {
  s.erase(s.begin() + p, s.begin() + p + replaced);
  s.insert(s.begin() + p, sizes);
  return s;
}

// Pads (after > 0) or shrinks (after < 0) the end of dim p.
Tensor resize_end(const Tensor& t, int64_t p, int64_t n) {
  int64_t cur = t.size(p);
  if (n <= cur) return t.slice(p, 0, n);
  std::vector<int64_t> pads(2 * (t.dim() - p), 0);
  pads.back() = n - cur;
  return t.pad(pads);
}

// Dim p of size L becomes (O, K) with element (o, k) = old[o * s + k * d]; returns whether the new
// dims are in the order (K, O) instead.
bool window_dim(const std::string& op, Tensor& t, int64_t p, int64_t k, int64_t s, int64_t d) {
  int64_t n = t.size(p), o = pool_out_size(n, k, s, d);
  if (o == 1) {  // one window: k taps every d (a stride past the end needs no padding)
    t = t.slice(p, 0, d * (k - 1) + 1, d).reshape(with(t.shape(), p, {1, k}));
    return false;
  }
  // o >= 2, so s < n, o * s < 2 * n and k * d < 2 * n: none of these overflow
  if (k * d <= s) {
    // windows do not overlap: split into o rows of s elements and keep k taps every d of each row
    t = resize_end(t, p, o * s).reshape(with(t.shape(), p, {o, s}));
    t = t.slice(p + 1, 0, k * d);
    if (d > 1) {
      t = t.reshape(with(t.shape(), p + 1, {k, d}));
      t = t.slice(p + 2, 0, 1).reshape(with(t.shape(), p, {o, k}, 3));
    }
    return false;
  }
  // overlapping windows: repeat the dim, then read it in rows of r = f*n + d elements, so row k starts
  // at offset k*d (mod n); row k, column o*s is old[k*d + o*s] (all such indices are below n)
  int64_t f = o * s > d ? (o * s - d - 1) / n + 1 : 0;  // ceil((o*s - d) / n)
  // r, k * r and the repeated length k * r rounded up to n, checked: they may exceed int64 where the
  // windows themselves do not
  int64_t r, kr = 0, repeated = 0;
  bool overflow = __builtin_mul_overflow(f, n, &r) || __builtin_add_overflow(r, d, &r) ||
                  __builtin_mul_overflow(k, r, &kr);
  int64_t reps = overflow ? 0 : (kr - 1) / n + 1;
  if (overflow || __builtin_mul_overflow(reps, n, &repeated))
    fail(op, "windows of " + std::to_string(k) + " taps (dilation " + std::to_string(d) + ", stride " +
                 std::to_string(s) + ") over " + std::to_string(n) +
                 " elements need a view of more elements than int64 can count");
  Shape rep = with(t.shape(), p, {1, n});
  t = t.reshape(rep);
  rep[p] = reps;
  t = t.expand(rep).reshape(with(rep, p, {repeated}, 2));
  t = t.slice(p, 0, kr).reshape(with(t.shape(), p, {k, r}));
  t = t.slice(p + 1, 0, o * s).reshape(with(t.shape(), p + 1, {o, s}));
  t = t.slice(p + 2, 0, 1).reshape(with(t.shape(), p, {k, o}, 3));
  return true;
}

}  // namespace

int64_t pool_out_size(int64_t n, int64_t k, int64_t s, int64_t d) {
  int64_t reach;  // from the window's first tap to its last
  if (__builtin_mul_overflow(d, k - 1, &reach) || reach > n - 1) return 0;
  return (n - 1 - reach) / s + 1;
}

Tensor pool_windows(const std::string& op, const Tensor& x, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation) {
  int64_t m = static_cast<int64_t>(kernel.size()), lead = x.dim() - m;
  Tensor t = x;
  std::vector<int64_t> out_perm(m), win_perm(m);
  for (int64_t i = 0; i < m; i++) {
    int64_t p = lead + 2 * i;
    bool swapped = window_dim(op, t, p, kernel[i], stride[i], dilation[i]);
    out_perm[i] = swapped ? p + 1 : p;
    win_perm[i] = swapped ? p : p + 1;
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < lead; i++) perm.push_back(i);
  perm.insert(perm.end(), out_perm.begin(), out_perm.end());
  perm.insert(perm.end(), win_perm.begin(), win_perm.end());
  return t.permute(perm);
}

}  // namespace kiln::frontend
