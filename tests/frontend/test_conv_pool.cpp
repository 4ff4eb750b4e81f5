// Convolution, pooling and interpolation (kiln::F) against the reference interpreter and against
// direct nested-loop implementations of PyTorch's definitions in double; errors and kernel counts.
#include <gtest/gtest.h>
#include <kiln/debug.h>
#include <kiln/functional.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln {
namespace {

using testing::expect_matches_reference;
using testing::expect_values;
using testing::random_tensor;
using Ints = std::vector<int64_t>;
using Vals = std::vector<double>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

Vals host(const Tensor& t) { return t.to(DType::F64).to_vector<double>(); }

// Row-major offset of a multi-index in a shape.
int64_t offset(const Shape& s, const Ints& idx) {
  int64_t o = 0;
  for (size_t i = 0; i < s.size(); i++) o = o * s[i] + idx[i];
  return o;
}

// Calls f(idx) for every multi-index of shape s, row-major.
void for_each_index(const Shape& s, const std::function<void(const Ints&)>& f) {
  Ints idx(s.size(), 0);
  for (int64_t n = numel(s), i = 0; i < n; i++) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; d--) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

Ints spatial(const Shape& s) { return Ints(s.begin() + 2, s.end()); }

// Compares y with the reference interpreter and with `want` (shape and values).
void check(const Tensor& y, const Shape& want_shape, const Vals& want, double tol = 1e-4) {
  ASSERT_EQ(y.shape(), want_shape);
  auto graph = y.node();
  y.realize();
  expect_matches_reference(y, graph, tol, tol);
  expect_values(y, want, tol, tol);
}

// --- direct definitions (PyTorch's), in double ---

// out[n, co, o] = b[co] + sum_{ci, k} x[n, g*cig + ci, o*s - p + k*d] * w[co, ci, k]
Vals naive_conv(const Vals& x, const Shape& xs, const Vals& w, const Shape& ws, const Vals* b, const Ints& s,
                const Ints& p, const Ints& d, int64_t groups, Shape& out_shape) {
  size_t m = xs.size() - 2;
  int64_t n = xs[0], cin = xs[1], cout = ws[0], cig = cin / groups, cog = cout / groups;
  Ints in = spatial(xs), k = spatial(ws), o(m);
  for (size_t i = 0; i < m; i++) o[i] = (in[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
  out_shape = {n, cout};
  out_shape.insert(out_shape.end(), o.begin(), o.end());
  Vals out(numel(out_shape), 0);
  for_each_index(out_shape, [&](const Ints& oi) {
    int64_t co = oi[1], g = co / cog;
    double acc = b ? (*b)[co] : 0;
    for (int64_t ci = 0; ci < cig; ci++)
      for_each_index(k, [&](const Ints& ki) {
        Ints xi{oi[0], g * cig + ci};
        for (size_t j = 0; j < m; j++) {
          int64_t pos = oi[2 + j] * s[j] - p[j] + ki[j] * d[j];
          if (pos < 0 || pos >= in[j]) return;
          xi.push_back(pos);
        }
        Ints wi{co, ci};
        wi.insert(wi.end(), ki.begin(), ki.end());
        acc += x[offset(xs, xi)] * w[offset(ws, wi)];
      });
    out[offset(out_shape, oi)] = acc;
  });
  return out;
}

// The adjoint: every x[n, ci, i] * w[ci, co_in_group, k] lands on out[n, g*cog + co, i*s - p + k*d].
Vals naive_conv_transpose(const Vals& x, const Shape& xs, const Vals& w, const Shape& ws, const Vals* b,
                          const Ints& s, const Ints& p, const Ints& op, const Ints& d, int64_t groups,
                          Shape& out_shape) {
  size_t m = xs.size() - 2;
  int64_t n = xs[0], cin = xs[1], cog = ws[1], cout = cog * groups, cig = cin / groups;
  Ints in = spatial(xs), k = spatial(ws), o(m);
  for (size_t i = 0; i < m; i++) o[i] = (in[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1;
  out_shape = {n, cout};
  out_shape.insert(out_shape.end(), o.begin(), o.end());
  Vals out(numel(out_shape), 0);
  for_each_index(out_shape, [&](const Ints& oi) {
    if (b) out[offset(out_shape, oi)] = (*b)[oi[1]];
  });
  for_each_index(xs, [&](const Ints& xi) {
    int64_t ci = xi[1], g = ci / cig;
    for (int64_t co = 0; co < cog; co++)
      for_each_index(k, [&](const Ints& ki) {
        Ints oi{xi[0], g * cog + co};
        for (size_t j = 0; j < m; j++) {
          int64_t pos = xi[2 + j] * s[j] - p[j] + ki[j] * d[j];
          if (pos < 0 || pos >= o[j]) return;
          oi.push_back(pos);
        }
        Ints wi{ci, co};
        wi.insert(wi.end(), ki.begin(), ki.end());
        out[offset(out_shape, oi)] += x[offset(xs, xi)] * w[offset(ws, wi)];
      });
  });
  return out;
}

// max / avg pooling over windows of the (virtually) padded input.
enum class PoolKind { Max, AvgIncludePad, AvgExcludePad };
Vals naive_pool(const Vals& x, const Shape& xs, const Ints& k, const Ints& s, const Ints& p, const Ints& d,
                PoolKind kind, Shape& out_shape) {
  size_t m = k.size();
  Ints in = spatial(xs), o(m);
  for (size_t i = 0; i < m; i++) o[i] = (in[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
  out_shape = {xs[0], xs[1]};
  out_shape.insert(out_shape.end(), o.begin(), o.end());
  Vals out(numel(out_shape));
  for_each_index(out_shape, [&](const Ints& oi) {
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t count = 0;
    for_each_index(k, [&](const Ints& ki) {
      Ints xi{oi[0], oi[1]};
      for (size_t j = 0; j < m; j++) {
        int64_t pos = oi[2 + j] * s[j] - p[j] + ki[j] * d[j];
        if (pos < 0 || pos >= in[j]) return;
        xi.push_back(pos);
      }
      double v = x[offset(xs, xi)];
      mx = std::max(mx, v), sum += v, count++;
    });
    double r = mx;
    if (kind == PoolKind::AvgIncludePad) r = sum / static_cast<double>(numel(k));
    if (kind == PoolKind::AvgExcludePad) r = sum / static_cast<double>(count);
    out[offset(out_shape, oi)] = r;
  });
  return out;
}

Vals naive_adaptive_avg(const Vals& x, const Shape& xs, int64_t oh, int64_t ow, Shape& out_shape) {
  int64_t h = xs[2], w = xs[3];
  out_shape = {xs[0], xs[1], oh, ow};
  Vals out(numel(out_shape));
  for_each_index(out_shape, [&](const Ints& oi) {
    int64_t h0 = static_cast<int64_t>(std::floor(static_cast<double>(oi[2] * h) / oh));
    int64_t h1 = static_cast<int64_t>(std::ceil(static_cast<double>((oi[2] + 1) * h) / oh));
    int64_t w0 = static_cast<int64_t>(std::floor(static_cast<double>(oi[3] * w) / ow));
    int64_t w1 = static_cast<int64_t>(std::ceil(static_cast<double>((oi[3] + 1) * w) / ow));
    double sum = 0;
    for (int64_t i = h0; i < h1; i++)
      for (int64_t j = w0; j < w1; j++) sum += x[offset(xs, {oi[0], oi[1], i, j})];
    out[offset(out_shape, oi)] = sum / static_cast<double>((h1 - h0) * (w1 - w0));
  });
  return out;
}

// PyTorch's nearest source index (float arithmetic, scale = 1/scale_factor when one is given).
int64_t nearest_src(int64_t o, int64_t in, int64_t out, std::optional<double> sf) {
  if (in == out) return o;
  float scale = sf ? static_cast<float>(1.0 / *sf) : static_cast<float>(in) / static_cast<float>(out);
  return std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
}

Vals naive_nearest(const Vals& x, const Shape& xs, const Ints& size, std::optional<double> sf,
                   Shape& out_shape) {
  Ints in = spatial(xs);
  out_shape = {xs[0], xs[1]};
  out_shape.insert(out_shape.end(), size.begin(), size.end());
  Vals out(numel(out_shape));
  for_each_index(out_shape, [&](const Ints& oi) {
    Ints xi{oi[0], oi[1]};
    for (size_t j = 0; j < in.size(); j++) xi.push_back(nearest_src(oi[2 + j], in[j], size[j], sf));
    out[offset(out_shape, oi)] = x[offset(xs, xi)];
  });
  return out;
}

// Source position, lower index and weight of the upper neighbour along one dim (upsample_bilinear2d).
void linear_src(int64_t o, int64_t in, int64_t out, std::optional<double> sf, bool ac, int64_t& i0,
                int64_t& i1, double& l1) {
  double scale = ac ? (out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0)
                    : (sf ? 1.0 / *sf : static_cast<double>(in) / static_cast<double>(out));
  double src =
      ac ? scale * static_cast<double>(o) : std::max(scale * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
  i0 = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
  i1 = std::min<int64_t>(i0 + 1, in - 1);
  l1 = std::min(std::max(src - static_cast<double>(i0), 0.0), 1.0);
}

Vals naive_bilinear(const Vals& x, const Shape& xs, int64_t oh, int64_t ow, std::optional<double> sf, bool ac,
                    Shape& out_shape) {
  out_shape = {xs[0], xs[1], oh, ow};
  Vals out(numel(out_shape));
  for_each_index(out_shape, [&](const Ints& oi) {
    int64_t h0, h1, w0, w1;
    double lh, lw;
    linear_src(oi[2], xs[2], oh, sf, ac, h0, h1, lh);
    linear_src(oi[3], xs[3], ow, sf, ac, w0, w1, lw);
    auto at = [&](int64_t i, int64_t j) { return x[offset(xs, {oi[0], oi[1], i, j})]; };
    out[offset(out_shape, oi)] =
        (1 - lh) * ((1 - lw) * at(h0, w0) + lw * at(h0, w1)) + lh * ((1 - lw) * at(h1, w0) + lw * at(h1, w1));
  });
  return out;
}

// --- convolution ---

struct ConvCase {
  Shape x, w;
  Ints stride, pad, dil;
  int64_t groups;
  bool bias;
};

std::string describe(const ConvCase& c) {
  auto s = [](const Ints& v) { return shape_str(v); };
  return "x " + shape_str(c.x) + " w " + shape_str(c.w) + " stride " + s(c.stride) + " pad " + s(c.pad) +
         " dil " + s(c.dil) + " groups " + std::to_string(c.groups) + (c.bias ? " bias" : "");
}

// unbatched: c.x has batch 1 and the input is given without it
void run_conv(const ConvCase& c, uint64_t seed, DType dt = DType::F32, bool unbatched = false) {
  SCOPED_TRACE(describe(c));
  Tensor x = random_tensor(c.x, dt, -1, 1, seed), w = random_tensor(c.w, dt, -1, 1, seed + 1);
  std::optional<Tensor> b;
  if (c.bias) b = random_tensor({c.w[0]}, dt, -1, 1, seed + 2);
  size_t m = c.x.size() - 2;
  Ints s = c.stride.size() == 1 ? Ints(m, c.stride[0]) : c.stride;
  Ints p = c.pad.size() == 1 ? Ints(m, c.pad[0]) : c.pad;
  Ints d = c.dil.size() == 1 ? Ints(m, c.dil[0]) : c.dil;
  Vals bv = b ? host(*b) : Vals{};
  Shape want_shape;
  Vals want = naive_conv(host(x), c.x, host(w), c.w, b ? &bv : nullptr, s, p, d, c.groups, want_shape);
  Tensor xin = unbatched ? x.squeeze(0) : x;
  if (unbatched) want_shape.erase(want_shape.begin());
  Tensor y = m == 1   ? F::conv1d(xin, w, b, c.stride, c.pad, c.dil, c.groups)
             : m == 2 ? F::conv2d(xin, w, b, c.stride, c.pad, c.dil, c.groups)
                      : F::conv3d(xin, w, b, c.stride, c.pad, c.dil, c.groups);
  check(y, want_shape, want, dt == DType::F64 ? 1e-10 : 1e-4);
}

TEST(ConvTest, Conv2dSweep) {
  // every stride 1-3 x padding 0-2 x dilation 1-2, with channels, groups, kernels and sizes varied
  int i = 0;
  for (int64_t s = 1; s <= 3; s++)
    for (int64_t p = 0; p <= 2; p++)
      for (int64_t d = 1; d <= 2; d++, i++) {
        int64_t groups = std::vector<int64_t>{1, 2, 4}[i % 3];  // 4 = C: depthwise
        int64_t cin = 4, cout = groups == 4 ? 4 : 6;
        int64_t kh = 1 + i % 3, kw = 1 + (i / 3) % 3 + (i % 2);
        int64_t n = 1 + i % 2, h = 7 + i % 5, w = 9 + (i * 3) % 7;
        run_conv({{n, cin, h, w}, {cout, cin / groups, kh, kw}, {s}, {p}, {d}, groups, i % 2 == 0}, 100 + i);
      }
}

TEST(ConvTest, Conv2dPerDimArguments) {
  run_conv({{2, 3, 11, 8}, {5, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 1, true}, 1);
  run_conv({{1, 6, 13, 5}, {6, 1, 5, 3}, {3, 1}, {2, 1}, {2, 1}, 6, false}, 2);
  run_conv({{3, 2, 5, 17}, {4, 2, 1, 4}, {1, 3}, {0, 2}, {1, 1}, 1, true}, 3);
  run_conv({{1, 1, 1, 1}, {1, 1, 1, 1}, {1}, {0}, {1}, 1, true}, 4);   // 1x1 everything
  run_conv({{2, 3, 4, 4}, {2, 3, 4, 4}, {1}, {0}, {1}, 1, true}, 5);   // kernel = input
  run_conv({{1, 2, 6, 6}, {2, 2, 3, 3}, {5}, {1}, {1}, 1, false}, 6);  // stride > kernel
  run_conv({{1, 2, 10, 9}, {2, 1, 2, 2}, {3}, {0}, {4}, 2, true}, 7);  // dilation > stride
  run_conv({{2, 8, 9, 9}, {8, 2, 3, 3}, {1}, {1}, {1}, 4, true}, 8);   // 4 groups
  run_conv({{1, 3, 3, 9}, {3, 3, 3, 1}, {1, 4}, {0, 0}, {1, 1}, 1, false}, 9);
}

TEST(ConvTest, Conv2dUnbatchedAndF64) {
  run_conv({{1, 2, 7, 6}, {3, 2, 3, 2}, {1}, {1}, {1}, 1, true}, 20, DType::F32, true);  // (C, H, W) input
  run_conv({{2, 4, 9, 7}, {6, 2, 3, 3}, {2}, {1}, {2}, 2, true}, 21, DType::F64);
  run_conv({{1, 3, 5, 5}, {2, 3, 2, 2}, {1}, {2}, {1}, 1, false}, 22, DType::F64);
}

TEST(ConvTest, Conv1dSweep) {
  int i = 0;
  for (int64_t s = 1; s <= 3; s++)
    for (int64_t p : {0, 2})
      for (int64_t d : {1, 2}) {
        int64_t groups = std::vector<int64_t>{1, 3}[i % 2], cin = 3, cout = groups == 3 ? 3 : 5;
        run_conv(
            {{1 + i % 2, cin, 10 + i}, {cout, cin / groups, 1 + i % 4}, {s}, {p}, {d}, groups, i % 2 == 1},
            200 + i++);
      }
}

TEST(ConvTest, Conv3dSweep) {
  run_conv({{1, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, {1}, {0}, {1}, 1, true}, 300);
  run_conv({{2, 4, 7, 5, 6}, {4, 2, 3, 2, 3}, {2, 1, 3}, {1, 0, 2}, {1, 2, 1}, 2, false}, 301);
  run_conv({{1, 3, 6, 6, 6}, {3, 1, 3, 3, 3}, {2}, {1}, {2}, 3, true}, 302);
  run_conv({{1, 1, 4, 3, 5}, {2, 1, 1, 1, 2}, {1, 2, 1}, {0}, {1, 1, 3}, 1, true}, 303);
}

struct ConvTCase {
  Shape x, w;
  Ints stride, pad, out_pad, dil;
  int64_t groups;
  bool bias;
};

void run_conv_transpose(const ConvTCase& c, uint64_t seed, DType dt = DType::F32) {
  SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w) + " stride " + shape_str(c.stride) + " pad " +
               shape_str(c.pad) + " out_pad " + shape_str(c.out_pad) + " dil " + shape_str(c.dil) +
               " groups " + std::to_string(c.groups));
  Tensor x = random_tensor(c.x, dt, -1, 1, seed), w = random_tensor(c.w, dt, -1, 1, seed + 1);
  std::optional<Tensor> b;
  if (c.bias) b = random_tensor({c.w[1] * c.groups}, dt, -1, 1, seed + 2);
  size_t m = c.x.size() - 2;
  auto full = [m](const Ints& v) { return v.size() == 1 ? Ints(m, v[0]) : v; };
  Vals bv = b ? host(*b) : Vals{};
  Shape want_shape;
  Vals want = naive_conv_transpose(host(x), c.x, host(w), c.w, b ? &bv : nullptr, full(c.stride), full(c.pad),
                                   full(c.out_pad), full(c.dil), c.groups, want_shape);
  Tensor y = m == 1 ? F::conv_transpose1d(x, w, b, c.stride, c.pad, c.out_pad, c.groups, c.dil)
                    : F::conv_transpose2d(x, w, b, c.stride, c.pad, c.out_pad, c.groups, c.dil);
  check(y, want_shape, want, dt == DType::F64 ? 1e-10 : 1e-4);
}

TEST(ConvTest, ConvTranspose2d) {
  run_conv_transpose({{1, 2, 4, 5}, {2, 3, 3, 3}, {1}, {0}, {0}, {1}, 1, true}, 400);
  run_conv_transpose({{2, 4, 5, 3}, {4, 3, 3, 2}, {2}, {1}, {1}, {1}, 1, false}, 401);
  run_conv_transpose({{1, 4, 3, 4}, {4, 2, 2, 3}, {3, 2}, {0, 1}, {2, 1}, {1}, 2, true}, 402);
  run_conv_transpose({{2, 3, 4, 4}, {3, 1, 3, 3}, {2}, {2}, {0}, {2}, 3, true}, 403);   // depthwise, dilated
  run_conv_transpose({{1, 2, 5, 6}, {2, 2, 2, 2}, {1}, {1}, {1}, {2}, 1, false}, 404);  // out_pad < dilation
  run_conv_transpose({{1, 1, 5, 6}, {1, 1, 2, 2}, {1}, {2}, {0}, {1}, 1, false}, 405);  // padding > d*(k-1)
  run_conv_transpose({{1, 2, 3, 2}, {2, 3, 4, 3}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, 1, true}, 406);
  run_conv_transpose({{1, 2, 3, 3}, {2, 2, 3, 3}, {2}, {1}, {1}, {1}, 1, true}, 407, DType::F64);
}

TEST(ConvTest, ConvTranspose1d) {
  run_conv_transpose({{2, 3, 7}, {3, 2, 3}, {2}, {1}, {1}, {1}, 1, true}, 500);
  run_conv_transpose({{1, 4, 5}, {4, 1, 4}, {3}, {0}, {2}, {2}, 2, false}, 501);
  run_conv_transpose({{1, 2, 1}, {2, 2, 1}, {1}, {0}, {0}, {1}, 1, true}, 502);
}

// A conv2d forward with bias is one fused kernel: the window view fuses into the reduce.
TEST(ConvTest, Conv2dIsOneKernelAfterItsPaddedInput) {
  Tensor x = random_tensor({2, 4, 10, 10}, DType::F32, -1, 1, 7);
  Tensor b = random_tensor({8}, DType::F32, -1, 1, 9);
  for (auto [s, p, d, g] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {2, 0, 2, 2}, {1, 1, 1, 4}}) {
    Tensor wg = random_tensor({8, 4 / g, 3, 3}, DType::F32, -1, 1, 10 + g);
    Tensor y = F::conv2d(x, wg, b, {s}, {p}, {d}, g);
    int64_t before = stats().kernels_run;
    y.realize();
    EXPECT_EQ(stats().kernels_run - before, p > 0 ? 2 : 1)  // the padded input, then the convolution
        << "stride " << s << " pad " << p << " dil " << d << " groups " << g;
  }
  // unpadded, an elementwise producer of the input stays in the convolution's kernel
  Tensor wg = random_tensor({8, 4, 3, 3}, DType::F32, -1, 1, 11);
  Tensor y = F::conv2d(x.relu(), wg, b);
  int64_t before = stats().kernels_run;
  y.realize();
  EXPECT_EQ(stats().kernels_run - before, 1);
}

TEST(ConvTest, Errors) {
  Tensor x = random_tensor({1, 4, 8, 8}, DType::F32, -1, 1, 1);
  Tensor w = random_tensor({6, 4, 3, 3}, DType::F32, -1, 1, 2);
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error, expected one containing: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(
      [&] {
        F::conv2d(x.reshape({4, 8, 2, 2, 2}), w);
      },
      "kiln.conv2d: expected a 3-D (unbatched) or 4-D");
  expect_error(
      [&] {
        F::conv2d(x, random_tensor({6, 3, 3, 3}, DType::F32, 0, 1, 3));
      },
      "kiln.conv2d: input (1, 4, 8, 8) has 4 channels, weight (6, 3, 3, 3) with groups 1 expects 3");
  expect_error(
      [&] {
        F::conv2d(x, random_tensor({6, 1, 3, 3}, DType::F32, 0, 1, 3), std::nullopt, {1}, {0}, {1}, 3);
      },
      "kiln.conv2d: groups 3 must divide input channels 4");
  expect_error([&] { F::conv2d(x, w, std::nullopt, {0}); },
               "kiln.conv2d: stride must be positive, got [0, 0]");
  expect_error(
      [&] {
        F::conv2d(x, w, std::nullopt, {1}, {0}, {1, 0});
      },
      "kiln.conv2d: dilation must be positive");
  expect_error([&] { F::conv2d(x, w, std::nullopt, {1}, {-1}); },
               "kiln.conv2d: padding must be non-negative");
  expect_error([&] { F::conv2d(x, w, std::nullopt, {1, 2, 3}); }, "kiln.conv2d: stride needs 1 or 2 values");
  expect_error([&] { F::conv2d(x, w, std::nullopt, {1}, {0}, {5}); },
               "kiln.conv2d: output size is not positive");
  expect_error([&] { F::conv2d(x, w, random_tensor({5}, DType::F32, 0, 1, 4)); },
               "kiln.conv2d: bias must have shape (6,), got (5,)");
  expect_error([&] { F::conv2d(x, w.to(DType::F64)); },
               "kiln.conv2d: input dtype f32 and weight dtype f64 differ");
  expect_error([&] { F::conv2d(x, w, std::nullopt, {1}, {0}, {1}, 0); },
               "kiln.conv2d: groups must be positive");
  expect_error([&] { F::conv1d(x, w); }, "kiln.conv1d: expected a 2-D (unbatched) or 3-D");
  expect_error(
      [&] {
        F::conv_transpose2d(x, random_tensor({4, 2, 3, 3}, DType::F32, 0, 1, 5), std::nullopt, {2}, {0}, {2});
      },
      "kiln.conv_transpose2d: output_padding [2, 2] must be smaller than stride [2, 2] or dilation [1, 1]");
  expect_error(
      [&] {
        F::conv_transpose2d(x, random_tensor({3, 2, 3, 3}, DType::F32, 0, 1, 5));
      },
      "kiln.conv_transpose2d: input (1, 4, 8, 8) has 4 channels, weight (3, 2, 3, 3) expects 3");
  expect_error(
      [&] {
        F::conv_transpose2d(x, random_tensor({4, 2, 1, 1}, DType::F32, 0, 1, 5), std::nullopt, {1}, {4});
      },
      "kiln.conv_transpose2d: output size is not positive");
  expect_error([&] { F::max_pool2d(x, {3}, {}, {2}); },
               "kiln.max_pool2d: padding [2, 2] must be at most half of kernel_size [3, 3]");
  expect_error([&] { F::max_pool2d(x, {9}); }, "kiln.max_pool2d: output size is not positive");
  expect_error(
      [&] {
        F::avg_pool2d(x, {0, 2});
      },
      "kiln.avg_pool2d: kernel_size must be positive, got [0, 2]");
  expect_error([&] { F::avg_pool1d(x, {2}); }, "kiln.avg_pool1d: expected a 2-D (unbatched) or 3-D");
  expect_error(
      [&] {
        F::adaptive_avg_pool2d(x, {0, 3});
      },
      "kiln.adaptive_avg_pool2d: output_size must be positive");
  expect_error([&] { F::interpolate(x, Ints{4}, "bicubic"); },
               "kiln.interpolate: mode must be \"nearest\" or \"bilinear\"");
  expect_error(
      [&] {
        F::interpolate(x.reshape({4, 8, 8}), Ints{4}, "bilinear");
      },
      "kiln.interpolate: bilinear needs a 4-D");
  expect_error([&] { F::interpolate(x, 0.0); }, "kiln.interpolate: scale_factor must be positive");
  expect_error([&] { F::interpolate(x, 0.05); }, "kiln.interpolate: output size [0, 0] must be positive");
}

// --- pooling ---

struct PoolCase {
  Shape x;
  Ints k, s, p, d;
};

void run_pool(const PoolCase& c, PoolKind kind, uint64_t seed, DType dt = DType::F32) {
  SCOPED_TRACE("x " + shape_str(c.x) + " k " + shape_str(c.k) + " s " + shape_str(c.s) + " p " +
               shape_str(c.p) + " d " + shape_str(c.d) + " kind " + std::to_string(static_cast<int>(kind)));
  Tensor x = random_tensor(c.x, dt, -1, 1, seed);
  size_t m = c.x.size() - 2;
  auto full = [m](const Ints& v) { return v.size() == 1 ? Ints(m, v[0]) : v; };
  Ints s = c.s.empty() ? full(c.k) : full(c.s);
  Shape want_shape;
  Vals want = naive_pool(host(x), c.x, full(c.k), s, full(c.p), full(c.d), kind, want_shape);
  Tensor y;
  if (kind == PoolKind::Max)
    y = m == 1 ? F::max_pool1d(x, c.k, c.s, c.p, c.d) : F::max_pool2d(x, c.k, c.s, c.p, c.d);
  else
    y = m == 1 ? F::avg_pool1d(x, c.k, c.s, c.p, kind == PoolKind::AvgIncludePad)
               : F::avg_pool2d(x, c.k, c.s, c.p, kind == PoolKind::AvgIncludePad);
  check(y, want_shape, want, dt == DType::F64 ? 1e-10 : 1e-5);
}

TEST(PoolTest, MaxPool2d) {
  int i = 0;
  for (int64_t k : {2, 3, 4})
    for (int64_t s : {1, 2, 3})
      for (int64_t d : {1, 2}) {
        int64_t p = std::min<int64_t>(k / 2, i % 3);
        run_pool({{1 + i % 2, 3, 9 + i % 4, 11 + i % 3}, {k}, {s}, {p}, {d}}, PoolKind::Max, 600 + i++);
      }
  run_pool({{2, 2, 7, 10}, {2, 3}, {}, {0}, {1}}, PoolKind::Max, 650);            // stride = kernel
  run_pool({{1, 3, 13, 8}, {3, 2}, {2, 1}, {1, 0}, {2, 3}}, PoolKind::Max, 651);  // per-dim everything
  run_pool({{3, 9, 9}, {3}, {2}, {1}, {1}}, PoolKind::Max, 652);                  // unbatched
  run_pool({{1, 2, 6, 7}, {3}, {2}, {1}, {2}}, PoolKind::Max, 653, DType::F64);
}

TEST(PoolTest, MaxPool1d) {
  run_pool({{2, 3, 10}, {3}, {}, {1}, {1}}, PoolKind::Max, 700);
  run_pool({{1, 2, 17}, {4}, {3}, {2}, {2}}, PoolKind::Max, 701);
  run_pool({{1, 1, 5}, {1}, {1}, {0}, {1}}, PoolKind::Max, 702);
}

TEST(PoolTest, AvgPool2d) {
  int i = 0;
  for (bool include : {true, false})
    for (int64_t k : {2, 3, 5})
      for (int64_t s : {1, 2, 3}) {
        Ints kk = i % 4 == 3 ? Ints{k, 2} : Ints{k};
        int64_t p = std::min<int64_t>(kk.back() / 2, 1 + i % 2);
        run_pool({{1 + i % 2, 2, 8 + i % 5, 10 + i % 3}, kk, {s}, {p}, {1}},
                 include ? PoolKind::AvgIncludePad : PoolKind::AvgExcludePad, 800 + i++);
      }
  run_pool({{2, 3, 9, 6}, {3, 2}, {}, {0}, {1}}, PoolKind::AvgExcludePad, 850);
  run_pool({{1, 2, 7, 7}, {3}, {2}, {1}, {1}}, PoolKind::AvgExcludePad, 851, DType::F64);
}

TEST(PoolTest, AvgPool1d) {
  run_pool({{2, 3, 11}, {3}, {2}, {1}, {1}}, PoolKind::AvgIncludePad, 900);
  run_pool({{2, 3, 11}, {3}, {2}, {1}, {1}}, PoolKind::AvgExcludePad, 901);
  run_pool({{1, 2, 9}, {4}, {}, {2}, {1}}, PoolKind::AvgExcludePad, 902);
}

TEST(PoolTest, AdaptiveAvgPool2d) {
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{{8, 8, 4, 4},
                                                                 {7, 9, 3, 4},
                                                                 {10, 5, 3, 5},
                                                                 {5, 5, 7, 3},
                                                                 {6, 13, 1, 1},
                                                                 {11, 7, 11, 2},
                                                                 {9, 9, 2, 6}}) {
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " -> " + std::to_string(oh) + "x" +
                 std::to_string(ow));
    Shape xs{2, 3, h, w};
    Tensor x = random_tensor(xs, DType::F32, -1, 1, h * 100 + w);
    Shape want_shape;
    Vals want = naive_adaptive_avg(host(x), xs, oh, ow, want_shape);
    check(F::adaptive_avg_pool2d(x, {oh, ow}), want_shape, want, 1e-5);
  }
  Tensor x = random_tensor({2, 3, 10, 7}, DType::F64, -1, 1, 1);
  Shape want_shape;
  Vals want = naive_adaptive_avg(host(x), x.shape(), 3, 3, want_shape);
  check(F::adaptive_avg_pool2d(x, {3}), want_shape, want, 1e-12);
  want = naive_adaptive_avg(host(x), x.shape(), 4, 4, want_shape);  // unbatched: (C, H, W)
  want_shape = {6, 4, 4};
  check(F::adaptive_avg_pool2d(x.reshape({6, 10, 7}), {4}), want_shape, want, 1e-12);
}

// Pooling is one kernel too, including the divisor of avg_pool without padding counted.
TEST(PoolTest, PoolingIsOneKernel) {
  Tensor x = random_tensor({2, 3, 11, 9}, DType::F32, -1, 1, 7);
  for (const Tensor& y : {F::max_pool2d(x, {3}, {2}, {1}, {2}), F::avg_pool2d(x, {3}, {2}, {1}, true),
                          F::avg_pool2d(x, {3, 2}, {1}, {1}, false)}) {
    int64_t before = stats().kernels_run;
    y.realize();
    EXPECT_EQ(stats().kernels_run - before, 1);
  }
}

// --- interpolation ---

TEST(PoolTest, InterpolateNearest) {
  struct Case {
    Shape x;
    Ints size;
    std::optional<double> sf;
  };
  for (auto& c : std::vector<Case>{{{1, 2, 4, 5}, {8, 10}, {}},
                                   {{2, 1, 6, 9}, {3, 3}, {}},
                                   {{1, 2, 5, 7}, {7, 4}, {}},
                                   {{1, 1, 3, 3}, {}, 3.0},
                                   {{1, 2, 5, 7}, {}, 1.5},
                                   {{1, 2, 9, 8}, {}, 0.5},
                                   {{1, 1, 4, 4}, {4, 11}, {}},
                                   {{2, 2, 7}, {12}, {}},
                                   {{1, 1, 3, 4, 5}, {6, 2, 7}, {}}}) {
    SCOPED_TRACE("x " + shape_str(c.x) + " size " + shape_str(c.size) + " sf " +
                 std::to_string(c.sf.value_or(0)));
    Tensor x = random_tensor(c.x, DType::F32, -1, 1, c.x[2] * 10 + c.x[1]);
    Ints size = c.size;
    if (c.sf)
      for (size_t i = 2; i < c.x.size(); i++)
        size.push_back(static_cast<int64_t>(std::floor(c.x[i] * *c.sf)));
    Shape want_shape;
    Vals want = naive_nearest(host(x), c.x, size, c.sf, want_shape);
    check(c.sf ? F::interpolate(x, *c.sf) : F::interpolate(x, c.size), want_shape, want, 0);
  }
  // integer dtypes are selected exactly
  Tensor xi = random_tensor({1, 2, 5, 3}, DType::I32, -1000, 1000, 3);
  Shape want_shape;
  Vals want = naive_nearest(host(xi), xi.shape(), {7, 5}, {}, want_shape);
  Tensor yi = F::interpolate(xi, Ints{7, 5});
  EXPECT_EQ(yi.dtype(), DType::I32);
  check(yi, want_shape, want, 0);
}

TEST(PoolTest, InterpolateBilinear) {
  struct Case {
    Shape x;
    Ints size;
    std::optional<double> sf;
  };
  int i = 0;
  for (bool ac : {false, true})
    for (auto& c : std::vector<Case>{{{1, 2, 4, 5}, {8, 10}, {}},
                                     {{2, 1, 9, 7}, {4, 3}, {}},
                                     {{1, 2, 5, 6}, {7, 4}, {}},
                                     {{1, 1, 3, 3}, {}, 2.5},
                                     {{1, 2, 8, 6}, {}, 0.5},
                                     {{1, 1, 4, 4}, {1, 9}, {}},
                                     {{1, 1, 5, 6}, {5, 6}, {}}}) {
      SCOPED_TRACE("x " + shape_str(c.x) + " size " + shape_str(c.size) + " sf " +
                   std::to_string(c.sf.value_or(0)) + " align_corners " + std::to_string(ac));
      Tensor x = random_tensor(c.x, DType::F32, -1, 1, 1000 + i++);
      Ints size = c.size;
      if (c.sf)
        for (size_t j = 2; j < 4; j++) size.push_back(static_cast<int64_t>(std::floor(c.x[j] * *c.sf)));
      Shape want_shape;
      Vals want = naive_bilinear(host(x), c.x, size[0], size[1], c.sf, ac, want_shape);
      check(c.sf ? F::interpolate(x, *c.sf, "bilinear", ac) : F::interpolate(x, c.size, "bilinear", ac),
            want_shape, want, 1e-5);
    }
  Tensor x = random_tensor({1, 2, 5, 4}, DType::F64, -1, 1, 5);
  Shape want_shape;
  Vals want = naive_bilinear(host(x), x.shape(), 8, 3, {}, false, want_shape);
  check(F::interpolate(x, Ints{8, 3}, "bilinear"), want_shape, want, 1e-12);
}

}  // namespace
}  // namespace kiln
