// Composite reductions (src/frontend/reduce_more.cpp) against the reference interpreter and against
// PyTorch's definitions written as host loops: dtypes, views, empty and size-1 dims, NaN/inf, ties.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/op_check.h"

namespace kiln {
namespace {

using namespace opcheck;
using L = std::vector<double>;

// Host oracle: f over each line of input 0 along d (a reduction, keepdim-free order).
Want per_line(int64_t d, std::function<double(const L&)> f) {
  return [d, f](const std::vector<Host>& h) {
    std::vector<double> out;
    int64_t dd = h[0].shape.empty() ? 0 : (d < 0 ? d + int64_t(h[0].shape.size()) : d);
    for (auto& l : lines(h[0].shape, dd)) {
      L v;
      for (auto k : l) v.push_back(h[0].v[k]);
      out.push_back(f(v));
    }
    return out;
  };
}
// Host oracle: f maps each line of input 0 along d to a line of the output (same shape).
Want per_line_map(int64_t d, std::function<L(const L&)> f) {
  return [d, f](const std::vector<Host>& h) {
    std::vector<double> out(h[0].v.size());
    int64_t dd = h[0].shape.empty() ? 0 : (d < 0 ? d + int64_t(h[0].shape.size()) : d);
    for (auto& l : lines(h[0].shape, dd)) {
      L v;
      for (auto k : l) v.push_back(h[0].v[k]);
      L r = f(v);
      for (size_t k = 0; k < l.size(); k++) out[l[k]] = r[k];
    }
    return out;
  };
}

double h_max(const L& v) {
  double m = -kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, x);
  }
  return m;
}
double h_lse(const L& v) {
  double m = h_max(v);
  if (std::isinf(m)) m = 0;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return std::log(s) + m;
}
double h_var(const L& v, int64_t corr) {
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  double s = 0;
  for (double x : v) s += (x - mean) * (x - mean);
  return s / double(std::max<int64_t>(0, int64_t(v.size()) - corr));
}
double h_norm(const L& v, double p) {
  double r = 0;
  if (p == kInf || p == -kInf) {
    r = p > 0 ? 0 : kInf;
    for (double x : v) r = p > 0 ? std::max(r, std::fabs(x)) : std::min(r, std::fabs(x));
    return r;
  }
  if (p == 0) {
    for (double x : v) r += x != 0;
    return r;
  }
  for (double x : v) r += std::pow(std::fabs(x), p);
  return std::pow(r, 1 / p);
}
// PyTorch: the first index of the max (of the first NaN if any)
double h_argmax(const L& v, bool min) {
  int64_t best = 0;
  for (size_t k = 0; k < v.size(); k++) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[k]) || (min ? v[k] < v[best] : v[k] > v[best])) best = int64_t(k);
  }
  return double(best);
}
L h_scan(const L& v, bool prod) {
  L r;
  double acc = prod ? 1 : 0;
  for (double x : v) r.push_back(acc = prod ? acc * x : acc + x);
  return r;
}

struct SD {
  Shape s;
  int64_t d;
};
const std::vector<SD> kCombos = {{{7}, 0},       {{3, 5}, 1}, {{3, 5}, 0},   {{3, 5}, -1},
                                 {{2, 3, 4}, 1}, {{1, 5}, 0}, {{17, 33}, 1}, {{}, 0},
                                 {{4, 1}, 1},    {{0, 3}, 1}, {{3, 0}, 1},   {{2, 3, 4}, -3}};
const std::vector<DType> kFloatTypes = {DType::F32, DType::F64, DType::F16, DType::BF16};

std::string lab(const char* op, const SD& c, DType t, int layout) {
  return std::string(op) + " shape=" + shape_str(c.s) + " d=" + std::to_string(c.d) + " " + dtype_name(t) +
         " layout=" + std::to_string(layout);
}

bool empty_line(const SD& c) { return !c.s.empty() && c.s[c.d < 0 ? c.d + c.s.size() : c.d] == 0; }

TEST(ReduceMore, LogSoftmaxLogsumexp) {
  Batch b;
  int k = 0;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32})
    for (auto& c : kCombos) {
      int layout = k++ % 4;
      Tensor x = input(c.s, t, -6, 6, 100 + k, layout);
      if (!empty_line(c))
        b.add(lab("log_softmax", c, t, layout), x.log_softmax(c.d), {x}, per_line_map(c.d, [](const L& v) {
                L r;
                double lse = h_lse(v);
                for (double e : v) r.push_back(e - lse);
                return r;
              }));
      b.add(lab("logsumexp", c, t, layout), x.logsumexp({c.d}), {x}, per_line(c.d, h_lse));
      b.add(lab("logsumexp_keepdim", c, t, layout), x.logsumexp({c.d}, true), {x}, per_line(c.d, h_lse));
    }
  Tensor x = input({2, 3, 4}, DType::F32, -3, 3, 7, 1);
  b.add("logsumexp dims 0,2", x.logsumexp({0, 2}), {x}, nullptr);
  b.add("logsumexp all", x.logsumexp({}), {x}, [](const std::vector<Host>& h) { return L{h_lse(h[0].v)}; });
  b.run();
}

TEST(ReduceMore, VarStd) {
  Batch b;
  int k = 0;
  for (DType t : kFloatTypes)
    for (auto& c : kCombos)
      for (int64_t corr : {1, 0, 2}) {
        int layout = k++ % 4;
        Tensor x = input(c.s, t, -3, 3, 200 + k, layout);
        b.add(lab("var", c, t, layout) + " corr=" + std::to_string(corr), x.var({c.d}, corr), {x},
              per_line(c.d, [corr](const L& v) { return h_var(v, corr); }));
        b.add(lab("std", c, t, layout) + " corr=" + std::to_string(corr), x.std({c.d}, corr, true), {x},
              per_line(c.d, [corr](const L& v) { return std::sqrt(h_var(v, corr)); }));
      }
  Tensor x = input({2, 3, 4}, DType::F64, -3, 3, 9, 2);
  b.add("var all", x.var(), {x}, [](const std::vector<Host>& h) { return L{h_var(h[0].v, 1)}; });
  b.add("std dims 0,-1", x.std({0, -1}), {x}, nullptr);
  b.run();
}

TEST(ReduceMore, Norm) {
  Batch b;
  int k = 0;
  for (DType t : kFloatTypes)
    for (auto& c : kCombos)
      for (double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5}) {
        if (empty_line(c) && std::isinf(p)) continue;  // PyTorch rejects max/min over nothing
        int layout = k++ % 4;
        Tensor x = input(c.s, t, -3, 3, 300 + k, layout);
        if (p == 0) x = (x * 0.7).trunc();  // some exact zeros
        b.add(lab("norm", c, t, layout) + " p=" + std::to_string(p), x.norm(p, {c.d}), {x},
              per_line(c.d, [p](const L& v) { return h_norm(v, p); }));
      }
  Tensor x = input({3, 5}, DType::F32, -3, 3, 11);
  b.add("norm all", x.norm(), {x}, [](const std::vector<Host>& h) { return L{h_norm(h[0].v, 2)}; });
  b.add("norm keepdim", x.norm(1, {0}, true), {x}, per_line(0, [](const L& v) { return h_norm(v, 1); }));
  b.run();
}

TEST(ReduceMore, AllAny) {
  Batch b;
  int k = 0;
  for (DType t : {DType::F32, DType::I32, DType::I64, DType::Bool, DType::F16})
    for (auto& c : kCombos) {
      int layout = k++ % 4;
      Tensor x = (input(c.s, t, -1, 1.5, 400 + k, layout));
      if (is_float(t)) x = x.trunc();  // zeros and nonzeros
      b.add(lab("all", c, t, layout), x.all({c.d}), {x}, per_line(c.d, [](const L& v) {
              return double(std::all_of(v.begin(), v.end(), [](double e) { return e != 0; }));
            }));
      b.add(lab("any", c, t, layout), x.any({c.d}, true), {x}, per_line(c.d, [](const L& v) {
              return double(std::any_of(v.begin(), v.end(), [](double e) { return e != 0; }));
            }));
    }
  b.run();
  EXPECT_EQ(tensor({1.0f, 2.0f}).all().dtype(), DType::Bool);
  testing::expect_values(tensor({1.0f, NAN}).all(), {1});  // NaN is true
  testing::expect_values(zeros({0}).all(), {1});
  testing::expect_values(zeros({0}).any(), {0});
  testing::expect_values(tensor({0.0f, 0.0f, 1.0f, 0.0f}, {2, 2}).any({0}), {1, 0});
}

TEST(ReduceMore, ArgmaxArgminMaxIndices) {
  Batch b;
  int k = 0;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::F16, DType::U8})
    for (auto& c : kCombos) {
      if (empty_line(c)) continue;
      int layout = k++ % 4;
      // small integer range: many ties
      Tensor x = input(c.s, t, is_float(t) ? -2 : 0, 3, 500 + k, layout);
      if (is_float(t)) x = x.trunc();
      auto am = [](bool mn) { return [mn](const L& v) { return h_argmax(v, mn); }; };
      b.add(lab("argmax", c, t, layout), x.argmax(c.d), {x}, per_line(c.d, am(false)));
      b.add(lab("argmin", c, t, layout), x.argmin(c.d, true), {x}, per_line(c.d, am(true)));
      auto [mv, mi] = x.max_with_indices(c.d);
      b.add(lab("max_with_indices.values", c, t, layout), mv, {x}, per_line(c.d, h_max));
      b.add(lab("max_with_indices.indices", c, t, layout), mi, {x}, per_line(c.d, am(false)));
      auto [nv, ni] = x.min_with_indices(c.d, true);
      b.add(lab("min_with_indices.values", c, t, layout), nv, {x},
            per_line(c.d, [](const L& v) { return *std::min_element(v.begin(), v.end()); }));
      b.add(lab("min_with_indices.indices", c, t, layout), ni, {x}, per_line(c.d, am(true)));
    }
  Tensor x = input({3, 5}, DType::F32, -2, 2, 13, 1);
  b.add("argmax flat", x.argmax(), {x},
        [](const std::vector<Host>& h) { return L{h_argmax(h[0].v, false)}; });
  b.add("argmin flat", x.argmin(), {x}, [](const std::vector<Host>& h) { return L{h_argmax(h[0].v, true)}; });
  b.run();
  EXPECT_EQ(x.argmax().dtype(), DType::I64);
  EXPECT_EQ(x.argmax(std::nullopt, true).shape(), (Shape{1, 1}));
  // ties: the first index, as PyTorch
  testing::expect_values(tensor({1.0f, 3.0f, 3.0f, 2.0f}).argmax(), {1});
  testing::expect_values(tensor({2.0f, 1.0f, 1.0f}).argmin(), {1});
  // NaN is the max and the min, first NaN wins
  Tensor n = tensor({1.0f, NAN, 3.0f, NAN});
  testing::expect_values(n.argmax(), {1});
  testing::expect_values(n.argmin(), {1});
  auto [v, i] = tensor({1.0f, 5.0f, NAN, 2.0f, 5.0f, 0.0f}, {2, 3}).max_with_indices(-1);
  testing::expect_values(v, {kNaN, 5});
  testing::expect_values(i, {2, 1});
  testing::expect_values(tensor({-INFINITY, -INFINITY}).argmax(), {0});
  testing::expect_values(full({}, 4.0).argmax(), {0});
}

TEST(ReduceMore, CumsumCumprod) {
  Batch b;
  int k = 0;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::F16, DType::BF16})
    for (auto& c : kCombos) {
      int layout = k++ % 4;
      bool fl = is_float(t);
      Tensor x = input(c.s, t, fl ? -2 : -2, 2, 600 + k, layout);
      Tensor y = input(c.s, t, fl ? 0.8 : -2, fl ? 1.25 : 2, 700 + k, layout);
      double atol = t == DType::F16 || t == DType::BF16 ? 0.1 : -1;
      b.add(lab("cumsum", c, t, layout), x.cumsum(c.d), {x},
            per_line_map(c.d, [](const L& v) { return h_scan(v, false); }), -1, atol);
      b.add(lab("cumprod", c, t, layout), y.cumprod(c.d), {y},
            per_line_map(c.d, [](const L& v) { return h_scan(v, true); }), -1, atol);
    }
  b.run();
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).cumsum(0).dtype(), DType::I64);
  EXPECT_EQ(tensor({1.0f}).cumsum(0).dtype(), DType::F32);
  testing::expect_values(tensor({5.0f}).cumsum(0), {5});
  EXPECT_EQ(zeros({0}).cumsum(0).shape(), Shape{0});
  EXPECT_EQ(zeros({2, 0}).cumprod(-1).shape(), (Shape{2, 0}));
  // inf and NaN stay in their own prefix (no 0 * inf from the mask)
  testing::expect_values(tensor({1.0f, INFINITY, 1.0f}).cumsum(0), {1, kInf, kInf});
  testing::expect_values(tensor({1.0f, 2.0f, NAN, 1.0f}).cumsum(0), {1, 3, kNaN, kNaN});
  testing::expect_values(tensor({2.0f, INFINITY, 0.0f}).cumprod(0), {2, kInf, kNaN});
}

TEST(ReduceMore, SpecialValues) {
  // logsumexp: -inf rows give -inf, +inf gives inf, NaN propagates; stable for large values
  Tensor x =
      tensor({-INFINITY, -INFINITY, -INFINITY, 0.0f, INFINITY, 1.0f, 1000.0f, 1000.0f, NAN, 1.0f}, {5, 2});
  testing::expect_values(x.logsumexp({1}), {-kInf, 0, kInf, 1000 + std::log(2.0), kNaN}, 1e-6, 1e-6);
  testing::expect_values(zeros({0}).logsumexp({0}), {-kInf});
  testing::expect_values(tensor({1000.0f, 0.0f}).log_softmax(0), {0, -1000});
  testing::expect_values(tensor({-1000.0f, 0.0f}).log_softmax(-1), {-1000, 0});
  // var: one element with correction 1 is NaN; correction past N divides by 0
  testing::expect_values(tensor({3.0f}).var(), {kNaN});
  testing::expect_values(tensor({1.0f, 3.0f}).var({}, 5), {kInf});
  testing::expect_values(tensor({1.0f, 3.0f}).var({}, 0), {1});
  testing::expect_values(tensor({1.0f, 3.0f}).std(), {std::sqrt(2.0)}, 1e-6);
  testing::expect_values(tensor({3.0f, -4.0f, 0.0f}).norm(), {5});
  testing::expect_values(tensor({3.0f, -4.0f, 0.0f}).norm(0), {2});
  testing::expect_values(tensor({3.0f, -4.0f, 0.0f}).norm(-kInf), {0});
  testing::expect_values(tensor({3.0f, -4.0f, 0.0f}).norm(kInf), {4});
  EXPECT_EQ(tensor({1.0f}).to(DType::F16).var().dtype(), DType::F16);
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).logsumexp({0}).dtype(), DType::F32);
}

TEST(ReduceMore, LogSoftmaxKernelCount) {
  for (Shape s : {Shape{64, 100}, Shape{3, 7, 33}}) {
    Tensor x = testing::random_tensor(s, DType::F32, -5, 5, 17);
    Tensor y = x.log_softmax(-1);
    int64_t before = stats().kernels_run;
    y.realize();
    EXPECT_LE(stats().kernels_run - before, 3) << shape_str(s);
  }
}

TEST(ReduceMore, Errors) {
  Tensor i = tensor(std::vector<int32_t>{1, 2, 3});
  expect_error([&] { i.var(); }, {"kiln.var:", "floating point", "i32", "(3,)"});
  expect_error([&] { i.std(); }, {"kiln.std:", "floating point", "i32"});
  expect_error([&] { i.norm(); }, {"kiln.norm:", "floating point", "i32"});
  expect_error([&] { tensor({1.0f}).norm(NAN); }, {"kiln.norm:", "NaN"});
  expect_error([&] { zeros({2, 0}).argmax(1); }, {"kiln.argmax:", "empty", "(2, 0)"});
  expect_error([&] { zeros({2, 0}).min_with_indices(1); }, {"kiln.min:", "empty"});
  expect_error([&] { zeros({2, 3}).argmax(2); }, {"kiln.argmax:", "dim 2 out of range"});
  expect_error([&] { zeros({2, 3}).log_softmax(-3); }, {"kiln.log_softmax:", "dim -3 out of range"});
  expect_error([&] { zeros({2, 3}).cumsum(5); }, {"kiln.cumsum:", "dim 5"});
  expect_error([&] { zeros({2, 3}).var({0, -2}); }, {"kiln.var:", "more than once"});
  expect_error([&] { zeros({2, 3}).logsumexp({3}); }, {"kiln.logsumexp:", "dim 3"});
}

// Integer max/min start from the dtype's extreme value (the accumulator's identity), so a line of
// nothing but that value reduces to it exactly, in every integer width.
TEST(ReduceMore, IntegerMaxMinOfTheDtypesExtremes) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Tensor x = tensor(std::vector<int64_t>{lo, lo, lo + 1, lo, hi, hi}, {3, 2});
  EXPECT_EQ(x.max(1).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo + 1, hi}));
  EXPECT_EQ(x.min(1).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo, hi}));
  constexpr int32_t lo32 = std::numeric_limits<int32_t>::min();
  Tensor y = tensor(std::vector<int32_t>{lo32, lo32, lo32, 5}, {2, 2});
  EXPECT_EQ(y.max(1).to_vector<int32_t>(), (std::vector<int32_t>{lo32, 5}));
  EXPECT_EQ(tensor(std::vector<int8_t>{-128, -128}).max().to_vector<int8_t>(), (std::vector<int8_t>{-128}));
}

}  // namespace
}  // namespace kiln
