// Convolution, transposed convolution, pooling and interpolation (kiln::F), all from the sliding-window
// view of pool_window.h or per-dim weight matrices, with reductions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "frontend/pool_window.h"
#include "kiln/functional.h"

namespace kiln::nn::functional {

using frontend::AutocastList;
using frontend::AutocastOp;

using frontend::check_shape;
using frontend::fail;
using frontend::pool_out_size;
using frontend::pool_windows;

namespace {

using Ints = std::vector<int64_t>;

std::string ints_str(const Ints& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); i++) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

// One value for all spatial dims or one per dim, as PyTorch's int-or-tuple arguments.
Ints per_dim(const std::string& op, const char* name, const Ints& v, size_t n) {
  if (v.size() == n) return v;
  if (v.size() == 1) return Ints(n, v[0]);
  fail(op, std::string(name) + " needs 1 or " + std::to_string(n) + " values, got " + ints_str(v));
}

void check_positive(const std::string& op, const char* name, const Ints& v) {
  for (auto x : v)
    if (x <= 0) fail(op, std::string(name) + " must be positive, got " + ints_str(v));
}

void check_nonnegative(const std::string& op, const char* name, const Ints& v) {
  for (auto x : v)
    if (x < 0) fail(op, std::string(name) + " must be non-negative, got " + ints_str(v));
}

// Accepts (N, C, L...) or the unbatched (C, L...); returns the batched input and whether to drop the
// batch dim again.
std::pair<Tensor, bool> batched(const std::string& op, const Tensor& x, size_t nsp) {
  int64_t want = static_cast<int64_t>(nsp) + 2;
  if (x.dim() == want) return {x, false};
  if (x.dim() == want - 1) return {x.unsqueeze(0), true};
  fail(op, "expected a " + std::to_string(want - 1) + "-D (unbatched) or " + std::to_string(want) +
               "-D (batched) input, got shape " + shape_str(x.shape()));
}

Tensor unbatched(const Tensor& y, bool drop) { return drop ? y.squeeze(0) : y; }

void check_float(const std::string& op, const Tensor& x, const char* what = "input") {
  if (!is_float(x.dtype()))
    fail(op, std::string(what) + " must be floating point, got " + to_string(x.dtype()));
}

// Pads the spatial dims (the last pads.size() dims) on both sides; negative values shrink instead.
Tensor pad_spatial(const Tensor& x, const Ints& before, const Ints& after, double value = 0) {
  size_t m = before.size();
  Ints pads(2 * m, 0);
  Tensor r = x;
  bool any = false;
  for (size_t i = 0; i < m; i++) {
    int64_t d = x.dim() - static_cast<int64_t>(m) + static_cast<int64_t>(i);
    if (before[i] < 0 || after[i] < 0)
      r = r.slice(d, std::max<int64_t>(-before[i], 0), r.size(d) - std::max<int64_t>(-after[i], 0));
    pads[2 * (m - 1 - i)] = std::max<int64_t>(before[i], 0);
    pads[2 * (m - 1 - i) + 1] = std::max<int64_t>(after[i], 0);
    any |= before[i] > 0 || after[i] > 0;
  }
  return any ? r.pad(pads, value) : r;
}

Ints last_dims(int64_t ndim, size_t m) {
  Ints r;
  for (int64_t i = ndim - static_cast<int64_t>(m); i < ndim; i++) r.push_back(i);
  return r;
}

// Output sizes of windows over the padded input; fails when one is not positive.
Ints out_sizes(const std::string& op, const Shape& in, const Ints& kernel, const Ints& stride,
               const Ints& pad, const Ints& dilation) {
  size_t m = kernel.size();
  Ints out(m);
  Shape padded = in;
  for (size_t i = 0; i < m; i++) {
    int64_t& n = padded[in.size() - m + i];
    if (__builtin_add_overflow(n, pad[i], &n) || __builtin_add_overflow(n, pad[i], &n))
      fail(op, "input " + shape_str(in) + " padded by " + ints_str(pad) + " has a size int64 cannot hold");
    out[i] = pool_out_size(n, kernel[i], stride[i], dilation[i]);
    if (out[i] <= 0)
      fail(op, "output size is not positive: input " + shape_str(in) + " padded by " + ints_str(pad) +
                   " is smaller than the kernel " + ints_str(kernel) + " with dilation " +
                   ints_str(dilation));
  }
  check_shape(op, padded);
  return out;
}

Tensor conv_nd(const std::string& op, size_t nsp, const Tensor& input, const Tensor& weight,
               const std::optional<Tensor>& bias, const Ints& stride_, const Ints& padding_,
               const Ints& dilation_, int64_t groups) {
  if (AutocastOp ac{AutocastList::Lower})
    return conv_nd(op, nsp, ac(input), ac(weight), ac(bias), stride_, padding_, dilation_, groups);
  auto [x, drop] = batched(op, input, nsp);
  check_float(op, x);
  if (weight.dim() != static_cast<int64_t>(nsp) + 2)
    fail(op, "weight must be " + std::to_string(nsp + 2) + "-D (C_out, C_in / groups, K...), got shape " +
                 shape_str(weight.shape()));
  if (weight.dtype() != x.dtype())
    fail(op, "input dtype " + to_string(x.dtype()) + " and weight dtype " + to_string(weight.dtype()) +
                 " differ");
  Ints stride = per_dim(op, "stride", stride_, nsp), padding = per_dim(op, "padding", padding_, nsp);
  Ints dilation = per_dim(op, "dilation", dilation_, nsp);
  check_positive(op, "stride", stride);
  check_positive(op, "dilation", dilation);
  check_nonnegative(op, "padding", padding);
  int64_t n = x.size(0), cin = x.size(1), cout = weight.size(0), g = groups;
  if (g <= 0) fail(op, "groups must be positive, got " + std::to_string(g));
  if (cin % g || cout % g)
    fail(op, "groups " + std::to_string(g) + " must divide input channels " + std::to_string(cin) +
                 " and output channels " + std::to_string(cout) + " (input " + shape_str(input.shape()) +
                 ", weight " + shape_str(weight.shape()) + ")");
  if (weight.size(1) * g != cin)
    fail(op, "input " + shape_str(input.shape()) + " has " + std::to_string(cin) + " channels, weight " +
                 shape_str(weight.shape()) + " with groups " + std::to_string(g) + " expects " +
                 std::to_string(weight.size(1) * g));
  Ints kernel(weight.shape().begin() + 2, weight.shape().end());
  check_positive(op, "kernel size", kernel);
  if (bias) {
    if (bias->shape() != Shape{cout})
      fail(op, "bias must have shape (" + std::to_string(cout) + ",), got " + shape_str(bias->shape()));
    if (bias->dtype() != x.dtype())
      fail(op,
           "input dtype " + to_string(x.dtype()) + " and bias dtype " + to_string(bias->dtype()) + " differ");
  }
  Ints out = out_sizes(op, x.shape(), kernel, stride, padding, dilation);
  // the convolution is a broadcast product (N, G, C_out/G, O..., C_in/G, K...) summed over the last
  Shape prod{n, g, cout / g};
  prod.insert(prod.end(), out.begin(), out.end());
  prod.push_back(cin / g);
  prod.insert(prod.end(), kernel.begin(), kernel.end());
  if (!ir::checked_numel(prod))
    fail(op, "input " + shape_str(input.shape()) + " and weight " + shape_str(weight.shape()) +
                 ": the convolution is a broadcast product of shape " + shape_str(prod) +
                 ", which has more elements than int64 can count");
  // windows (N, C_in, O..., K...) -> (N, G, 1, O..., C_in/G, K...)
  // a padded input in a buffer of its own: the convolution's loads then need no bounds checks, so
  // its inner loop vectorizes (a copy of the input against the convolution's FLOPs); an unpadded
  // one stays fused with what computes it
  Tensor padded = pad_spatial(x, padding, padding);
  if (std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p > 0; }))
    padded = padded.contiguous();
  Tensor win = pool_windows(op, padded, kernel, stride, dilation);
  Shape ws{n, g, 1, cin / g};
  ws.insert(ws.end(), out.begin(), out.end());
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  Ints perm{0, 1, 2};
  for (size_t i = 0; i < nsp; i++) perm.push_back(4 + static_cast<int64_t>(i));
  perm.push_back(3);
  for (size_t i = 0; i < nsp; i++) perm.push_back(4 + static_cast<int64_t>(nsp + i));
  win = win.reshape(ws).permute(perm);
  // weight (C_out, C_in/G, K...) -> (1, G, C_out/G, 1..., C_in/G, K...)
  Shape wsh{1, g, cout / g};
  wsh.insert(wsh.end(), nsp, 1);
  wsh.push_back(cin / g);
  wsh.insert(wsh.end(), kernel.begin(), kernel.end());
  Tensor y = (win * weight.reshape(wsh)).sum(last_dims(win.dim(), nsp + 1));
  Shape ys{n, cout};
  ys.insert(ys.end(), out.begin(), out.end());
  y = y.reshape(ys);
  if (bias) {
    Shape bs{1, cout};
    bs.insert(bs.end(), nsp, 1);
    y = y + bias->reshape(bs);
  }
  return unbatched(y, drop);
}

Tensor conv_transpose_nd(const std::string& op, size_t nsp, const Tensor& input, const Tensor& weight,
                         const std::optional<Tensor>& bias, const Ints& stride_, const Ints& padding_,
                         const Ints& output_padding_, int64_t groups, const Ints& dilation_) {
  if (AutocastOp ac{AutocastList::Lower})
    return conv_transpose_nd(op, nsp, ac(input), ac(weight), ac(bias), stride_, padding_, output_padding_,
                             groups, dilation_);
  auto [x, drop] = batched(op, input, nsp);
  check_float(op, x);
  if (weight.dim() != static_cast<int64_t>(nsp) + 2)
    fail(op, "weight must be " + std::to_string(nsp + 2) + "-D (C_in, C_out / groups, K...), got shape " +
                 shape_str(weight.shape()));
  Ints stride = per_dim(op, "stride", stride_, nsp), padding = per_dim(op, "padding", padding_, nsp);
  Ints output_padding = per_dim(op, "output_padding", output_padding_, nsp);
  Ints dilation = per_dim(op, "dilation", dilation_, nsp);
  check_positive(op, "stride", stride);
  check_positive(op, "dilation", dilation);
  check_nonnegative(op, "padding", padding);
  check_nonnegative(op, "output_padding", output_padding);
  for (size_t i = 0; i < nsp; i++)
    if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
      fail(op, "output_padding " + ints_str(output_padding) + " must be smaller than stride " +
                   ints_str(stride) + " or dilation " + ints_str(dilation));
  int64_t cin = x.size(1), g = groups;
  if (g <= 0) fail(op, "groups must be positive, got " + std::to_string(g));
  if (weight.size(0) != cin)
    fail(op, "input " + shape_str(input.shape()) + " has " + std::to_string(cin) + " channels, weight " +
                 shape_str(weight.shape()) + " expects " + std::to_string(weight.size(0)));
  if (cin % g)
    fail(op, "groups " + std::to_string(g) + " must divide input channels " + std::to_string(cin) +
                 " (weight " + shape_str(weight.shape()) + ")");
  int64_t cout = weight.size(1) * g;
  Ints kernel(weight.shape().begin() + 2, weight.shape().end());
  check_positive(op, "kernel size", kernel);
  Shape dilated = x.shape();  // the input with stride - 1 zeros after each element
  for (size_t i = 0; i < nsp; i++) {
    int64_t l = x.size(2 + static_cast<int64_t>(i));
    auto what = [&] {
      return " for input " + shape_str(input.shape()) + ", kernel " + ints_str(kernel) + ", stride " +
             ints_str(stride) + ", padding " + ints_str(padding) + ", dilation " + ints_str(dilation);
    };
    // o = (l - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1, checked
    int64_t o, reach;
    if (__builtin_mul_overflow(l - 1, stride[i], &o) ||
        __builtin_mul_overflow(dilation[i], kernel[i] - 1, &reach) || __builtin_add_overflow(o, reach, &o) ||
        __builtin_add_overflow(o, output_padding[i] + 1, &o) || __builtin_sub_overflow(o, padding[i], &o) ||
        __builtin_sub_overflow(o, padding[i], &o))
      fail(op, "output size of spatial dim " + std::to_string(i) + " is more than int64 can count" + what());
    if (o <= 0) fail(op, "output size is not positive (" + std::to_string(o) + ")" + what());
    if (__builtin_mul_overflow(l, stride[i], &dilated[2 + i]))
      fail(op, "the input dilated by the stride (" + std::to_string(l) + " x " + std::to_string(stride[i]) +
                   " elements in spatial dim " + std::to_string(i) + ") is more than int64 can count" +
                   what());
  }
  check_shape(op, dilated);
  // dilate the input: s-1 zeros after each element, as (L, 1) padded to (L, s), flattened and cut
  Tensor xd = x;
  for (size_t i = 0; i < nsp; i++) {
    if (stride[i] == 1) continue;
    int64_t d = 2 + static_cast<int64_t>(i), l = xd.size(d);
    Shape s = xd.shape();
    s.insert(s.begin() + d + 1, 1);
    Ints pads(2 * (xd.dim() + 1 - d - 1), 0);
    pads.back() = stride[i] - 1;
    Tensor t = xd.reshape(s).pad(pads);
    s.erase(s.begin() + d + 1);
    s[d] = l * stride[i];
    xd = t.reshape(s).slice(d, 0, (l - 1) * stride[i] + 1);
  }
  Ints before(nsp), after(nsp);
  for (size_t i = 0; i < nsp; i++) {
    before[i] = dilation[i] * (kernel[i] - 1) - padding[i];
    after[i] = before[i] + output_padding[i];
  }
  xd = pad_spatial(xd, before, after);
  // weight (C_in, C_out/G, K...) -> (C_out, C_in/G, K...) flipped over K
  Shape w4{g, cin / g, cout / g};
  w4.insert(w4.end(), kernel.begin(), kernel.end());
  Ints perm{0, 2, 1};
  for (size_t i = 0; i < nsp; i++) perm.push_back(3 + static_cast<int64_t>(i));
  Shape wc{cout, cin / g};
  wc.insert(wc.end(), kernel.begin(), kernel.end());
  Tensor w = weight.reshape(w4).permute(perm).reshape(wc).flip(last_dims(static_cast<int64_t>(nsp) + 2, nsp));
  Tensor y = conv_nd(op, nsp, xd, w, bias, {1}, {0}, dilation, g);
  return unbatched(y, drop);
}

// kernel_size / stride / padding / dilation of a pooling op, checked as PyTorch does.
struct PoolArgs {
  Ints kernel, stride, padding, dilation, out;
};

PoolArgs pool_args(const std::string& op, const Tensor& x, size_t nsp, const Ints& kernel_,
                   const Ints& stride_, const Ints& padding_, const Ints& dilation_) {
  PoolArgs a;
  a.kernel = per_dim(op, "kernel_size", kernel_, nsp);
  a.stride = stride_.empty() ? a.kernel : per_dim(op, "stride", stride_, nsp);
  a.padding = per_dim(op, "padding", padding_, nsp);
  a.dilation = per_dim(op, "dilation", dilation_, nsp);
  check_positive(op, "kernel_size", a.kernel);
  check_positive(op, "stride", a.stride);
  check_positive(op, "dilation", a.dilation);
  check_nonnegative(op, "padding", a.padding);
  for (size_t i = 0; i < nsp; i++)
    if (a.padding[i] > a.kernel[i] / 2)
      fail(op,
           "padding " + ints_str(a.padding) + " must be at most half of kernel_size " + ints_str(a.kernel));
  a.out = out_sizes(op, x.shape(), a.kernel, a.stride, a.padding, a.dilation);
  return a;
}

double lowest(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
    case DType::U32:
    case DType::U64: return 0;
    case DType::I8: return -128;
    case DType::I16: return -32768;
    case DType::I32: return -2147483648.0;
    case DType::I64: return -9223372036854775808.0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

Tensor max_pool_nd(const std::string& op, size_t nsp, const Tensor& input, const Ints& kernel,
                   const Ints& stride, const Ints& padding, const Ints& dilation) {
  auto [x, drop] = batched(op, input, nsp);
  PoolArgs a = pool_args(op, x, nsp, kernel, stride, padding, dilation);
  Tensor xp = pad_spatial(x, a.padding, a.padding, lowest(x.dtype()));
  Tensor win = pool_windows(op, xp, a.kernel, a.stride, a.dilation);
  return unbatched(win.max(last_dims(win.dim(), nsp)), drop);
}

Tensor avg_pool_nd(const std::string& op, size_t nsp, const Tensor& input, const Ints& kernel,
                   const Ints& stride, const Ints& padding, bool count_include_pad) {
  Autocast plain(std::nullopt);  // its mean / sum / matmul keep the input's dtype, as PyTorch's op
  auto [x, drop] = batched(op, input, nsp);
  check_float(op, x);
  PoolArgs a = pool_args(op, x, nsp, kernel, stride, padding, {1});
  Tensor win = pool_windows(op, pad_spatial(x, a.padding, a.padding), a.kernel, a.stride, a.dilation);
  Ints dims = last_dims(win.dim(), nsp);
  bool padded = false;
  for (auto p : a.padding) padded |= p > 0;
  if (count_include_pad || !padded) return unbatched(win.mean(dims), drop);
  // divide by the number of input (not padding) elements of each window: per dim, the overlap of
  // [o*s - p, o*s - p + k) with [0, L), computed elementwise so it fuses with the sum
  DType dt = x.dtype();
  Tensor count = full({}, 1.0, dt);
  for (size_t i = 0; i < nsp; i++) {
    int64_t len = x.size(2 + static_cast<int64_t>(i));
    Tensor lo = arange(0, static_cast<double>(a.out[i]), 1, dt) * a.stride[i] - a.padding[i];
    Tensor hi = lo + a.kernel[i];
    Tensor c = minimum(hi, full({}, len, dt)) - maximum(lo, full({}, 0.0, dt));
    Shape cs(nsp, 1);
    cs[i] = a.out[i];
    count = count * c.reshape(cs);
  }
  return unbatched(win.sum(dims) / count, drop);
}

// Applies the (out, in) matrix m along dim d of x: y[.., o, ..] = sum_i m[o, i] x[.., i, ..].
Tensor apply_along(const Tensor& x, int64_t d, const Tensor& m) {
  Tensor t = x.transpose(d, -1);
  return t.matmul(m.t()).transpose(d, -1);
}

// Resizing the spatial dims of x (from dim 2) to `out` makes that output shape and (out, in) host
// matrices: fails when int64 cannot count their elements.
void check_resize(const std::string& op, const Tensor& x, const Ints& out) {
  Shape s(x.shape().begin(), x.shape().begin() + 2);
  s.insert(s.end(), out.begin(), out.end());
  check_shape(op, s);
  for (size_t i = 0; i < out.size(); i++) {
    int64_t cells;
    if (__builtin_mul_overflow(out[i], x.size(2 + static_cast<int64_t>(i)), &cells))
      fail(op, "output size " + ints_str(out) + " for input " + shape_str(x.shape()) +
                   " needs an (out, in) matrix of more elements than int64 can count");
  }
}

Tensor host_matrix(const std::vector<double>& v, int64_t rows, int64_t cols, DType t) {
  return tensor(v, {rows, cols}).to(t);
}

// The (out, in) averaging matrix of adaptive pooling: row o averages [floor(o*in/out), ceil((o+1)*in/out)).
std::vector<double> adaptive_matrix(int64_t in, int64_t out) {
  std::vector<double> m(out * in, 0);
  for (int64_t o = 0; o < out; o++) {
    int64_t b = (o * in) / out, e = ((o + 1) * in + out - 1) / out;
    for (int64_t i = b; i < e; i++) m[o * in + i] = 1.0 / static_cast<double>(e - b);
  }
  return m;
}

// PyTorch's source-index scale of interpolation along one dim (scale_factor: the user's, or none).
double interp_scale(int64_t in, int64_t out, std::optional<double> scale_factor, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0;
  if (scale_factor && *scale_factor > 0) return 1.0 / *scale_factor;
  return static_cast<double>(in) / static_cast<double>(out);
}

// Nearest-neighbour along dim d: integer up/down scales are views, others a one-hot matrix product.
Tensor nearest_dim(const Tensor& x, int64_t d, int64_t out, std::optional<double> scale_factor) {
  int64_t in = x.size(d);
  float scale = static_cast<float>(interp_scale(in, out, scale_factor, false));
  Ints src(out);
  for (int64_t o = 0; o < out; o++)
    src[o] = out == in
                 ? o
                 : std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
  // arithmetic progression: a strided slice
  int64_t step = out > 1 ? src[1] - src[0] : 1;
  bool progression = step >= 1;
  for (int64_t o = 0; o < out && progression; o++) progression = src[o] == src[0] + o * step;
  if (progression) return x.slice(d, src[0], src[0] + (out - 1) * step + 1, step);
  // each element repeated r times: (.., in, 1, ..) expanded to (.., in, r, ..), cut to out
  int64_t r = 1;
  while (r < out && src[r] == 0) r++;
  bool repeat = out <= in * r;
  for (int64_t o = 0; o < out && repeat; o++) repeat = src[o] == o / r;
  if (repeat) {
    Shape s = x.shape();
    s.insert(s.begin() + d + 1, 1);
    Shape e = s;
    e[d + 1] = r;
    Shape f = x.shape();
    f[d] = in * r;
    return x.reshape(s).expand(e).reshape(f).slice(d, 0, out);
  }
  std::vector<double> m(out * in, 0);
  for (int64_t o = 0; o < out; o++) m[o * in + src[o]] = 1;
  Tensor y = apply_along(x, d, host_matrix(m, out, in, x.dtype()));
  return y.to(x.dtype());
}

// Linear interpolation matrix along one dim, as PyTorch's upsample_bilinear2d.
std::vector<double> linear_matrix(int64_t in, int64_t out, std::optional<double> scale_factor,
                                  bool align_corners) {
  double scale = interp_scale(in, out, scale_factor, align_corners);
  std::vector<double> m(out * in, 0);
  for (int64_t o = 0; o < out; o++) {
    double src = align_corners ? scale * static_cast<double>(o)
                               : std::max(scale * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
    int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in - 1);
    int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
    double l1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
    m[o * in + i0] += 1 - l1;
    m[o * in + i1] += l1;
  }
  return m;
}

Tensor interpolate_impl(const Tensor& input, Ints size, std::optional<double> scale_factor,
                        const std::string& mode, bool align_corners) {
  Autocast plain(std::nullopt);  // its mean / sum / matmul keep the input's dtype, as PyTorch's op
  const std::string op = "interpolate";
  if (mode != "nearest" && mode != "bilinear")
    fail(op, "mode must be \"nearest\" or \"bilinear\", got \"" + mode + "\"");
  if (mode == "bilinear" && input.dim() != 4)
    fail(op, "bilinear needs a 4-D (N, C, H, W) input, got shape " + shape_str(input.shape()));
  if (mode == "nearest" && (input.dim() < 3 || input.dim() > 5))
    fail(op, "nearest needs a 3-D to 5-D (N, C, spatial...) input, got shape " + shape_str(input.shape()));
  if (mode == "nearest" && align_corners) fail(op, "align_corners can only be set with the bilinear mode");
  size_t nsp = static_cast<size_t>(input.dim() - 2);
  if (scale_factor) {
    if (!(*scale_factor > 0) || !std::isfinite(*scale_factor))
      fail(op, "scale_factor must be positive and finite, got " + std::to_string(*scale_factor));
    size.clear();
    for (size_t i = 0; i < nsp; i++) {
      double s = std::floor(static_cast<double>(input.size(2 + i)) * *scale_factor);
      if (s >= 0x1p63) {
        std::ostringstream os;
        os << "scale_factor " << *scale_factor << " makes an output size of input "
           << shape_str(input.shape()) << " that int64 cannot hold";
        fail(op, os.str());
      }
      size.push_back(static_cast<int64_t>(s));
    }
  } else {
    size = per_dim(op, "size", size, nsp);
  }
  for (auto s : size)
    if (s <= 0)
      fail(op,
           "output size " + ints_str(size) + " must be positive (input " + shape_str(input.shape()) + ")");
  check_resize(op, input, size);
  Tensor y = input;
  if (mode == "nearest") {
    for (size_t i = 0; i < nsp; i++) y = nearest_dim(y, 2 + i, size[i], scale_factor);
    return y;
  }
  check_float(op, input);
  for (size_t i = 0; i < nsp; i++) {
    int64_t in = input.size(2 + i);
    if (in == size[i] && !align_corners) continue;  // identity
    y = apply_along(
        y, 2 + i,
        host_matrix(linear_matrix(in, size[i], scale_factor, align_corners), size[i], in, input.dtype()));
  }
  return y;
}

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        Ints stride, Ints padding, Ints output_padding, int64_t groups, Ints dilation) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                           groups, dilation);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        Ints stride, Ints padding, Ints output_padding, int64_t groups, Ints dilation) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                           groups, dilation);
}
Tensor max_pool1d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation) {
  return max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation);
}
Tensor max_pool2d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation) {
  return max_pool_nd("max_pool2d", 2, input, kernel_size, stride, padding, dilation);
}
Tensor avg_pool1d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool count_include_pad) {
  return avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, count_include_pad);
}
Tensor avg_pool2d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool count_include_pad) {
  return avg_pool_nd("avg_pool2d", 2, input, kernel_size, stride, padding, count_include_pad);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Ints output_size) {
  Autocast plain(std::nullopt);  // its mean / sum / matmul keep the input's dtype, as PyTorch's op
  const std::string op = "adaptive_avg_pool2d";
  auto [x, drop] = batched(op, input, 2);
  check_float(op, x);
  Ints out = per_dim(op, "output_size", output_size, 2);
  check_positive(op, "output_size", out);
  check_resize(op, x, out);
  bool divisible = x.size(2) % out[0] == 0 && x.size(3) % out[1] == 0;
  if (divisible) {  // equal windows: the pooling construction
    Ints k{x.size(2) / out[0], x.size(3) / out[1]};
    return unbatched(pool_windows(op, x, k, k, {1, 1}).mean({-2, -1}), drop);
  }
  Tensor y = x;
  for (int64_t i = 0; i < 2; i++) {
    int64_t in = x.size(2 + i);
    if (in == out[i]) continue;
    y = apply_along(y, 2 + i, host_matrix(adaptive_matrix(in, out[i]), out[i], in, x.dtype()));
  }
  return unbatched(y, drop);
}

Tensor interpolate(const Tensor& input, Ints size, const std::string& mode, bool align_corners) {
  return interpolate_impl(input, std::move(size), std::nullopt, mode, align_corners);
}
Tensor interpolate(const Tensor& input, double scale_factor, const std::string& mode, bool align_corners) {
  return interpolate_impl(input, {}, scale_factor, mode, align_corners);
}

}  // namespace kiln::nn::functional
