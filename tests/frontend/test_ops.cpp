// The table-driven op suite (after ggml's test-backend-ops and tinygrad's test_ops): every op of
// include/kiln/tensor.h over shapes, broadcasting, non-contiguous inputs and dtypes, compiled and
// compared with the float64 reference interpreter (and, for float elementwise ops, with the host's
// <cmath> as the PyTorch semantics); then creation ops, RNG, NaN/Inf, integer wrap-around and a large
// reduction.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "helpers.h"
#include "ir/node.h"

namespace kiln {
namespace {

using testing::default_tol;
using testing::expect_matches_reference;
using testing::expect_values;
using testing::random_tensor;
using testing::Tol;

using Ts = std::vector<Tensor>;
using Fn = std::function<Tensor(const Ts&)>;
using Host = std::function<double(const std::vector<double>&)>;
using ShapeSet = std::vector<Shape>;  // one shape per input

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// --- dtype sets ---
enum : unsigned {
  kF32 = 1u << 0,
  kF64 = 1u << 1,
  kF16 = 1u << 2,
  kBF16 = 1u << 3,
  kI32 = 1u << 4,
  kI64 = 1u << 5,
  kI8 = 1u << 6,
  kU8 = 1u << 7,
  kBool = 1u << 8,
};
constexpr unsigned kFloats = kF32 | kF64 | kF16 | kBF16;
constexpr unsigned kInts = kI32 | kI64 | kI8 | kU8;
constexpr unsigned kNumeric = kFloats | kInts;
constexpr unsigned kAll = kNumeric | kBool;
const std::vector<std::pair<unsigned, DType>> kDTypes = {
    {kF32, DType::F32}, {kF64, DType::F64}, {kF16, DType::F16}, {kBF16, DType::BF16}, {kI32, DType::I32},
    {kI64, DType::I64}, {kI8, DType::I8},   {kU8, DType::U8},   {kBool, DType::Bool}};

// --- input layouts: how a non-contiguous input of a given shape is made ---
enum class Layout { Contig, Permuted, Strided, Flipped, Expanded };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contig: return "contiguous";
    case Layout::Permuted: return "permuted";
    case Layout::Strided: return "strided";
    case Layout::Flipped: return "flipped";
    case Layout::Expanded: return "expanded";
  }
  return "?";
}

Tensor make_input(const Shape& s, DType t, double lo, double hi, uint64_t seed, Layout l) {
  size_t n = s.size();
  switch (l) {
    case Layout::Contig: return random_tensor(s, t, lo, hi, seed);
    case Layout::Permuted: {  // a tensor of the reversed shape, permuted back
      Shape r(s.rbegin(), s.rend());
      std::vector<int64_t> perm(n);
      for (size_t i = 0; i < n; i++) perm[i] = static_cast<int64_t>(n - 1 - i);
      return random_tensor(r, t, lo, hi, seed).permute(perm);
    }
    case Layout::Strided: {  // dim 0 with step 2, the last dim with step 3 from a negative start
      Shape b = s;
      b[0] = 2 * s[0] + 1;
      if (n > 1) b[n - 1] = 3 * s[n - 1] + 1;
      Tensor x = random_tensor(b, t, lo, hi, seed).slice(0, 1, std::nullopt, 2);
      if (n > 1) x = x.slice(-1, -3 * s[n - 1], std::nullopt, 3);
      return x;
    }
    case Layout::Flipped: {
      std::vector<int64_t> dims(n);
      std::iota(dims.begin(), dims.end(), 0);
      return random_tensor(s, t, lo, hi, seed).flip(dims);
    }
    case Layout::Expanded: {  // dim 0 broadcast from size 1
      Shape b = s;
      b[0] = 1;
      return random_tensor(b, t, lo, hi, seed).expand(s);
    }
  }
  return {};
}

// --- the table ---
struct Config {
  ShapeSet shapes;
  Layout layout =
      Layout::Contig;  // input i gets layout (layout + i), cycling through the non-contiguous ones
  bool core = true;    // also run for the non-f32 dtypes
};

struct Row {
  std::string name;
  int nin;
  double lo, hi;
  Fn fn;
  unsigned dtypes;
  std::vector<Config> configs;
  bool transcendental = false;  // f32 rtol 1e-4
  double atol_scale = 1;        // for reductions and matmuls, whose absolute error grows with the size
  Host host = nullptr;          // the PyTorch value of one element (float dtypes, unbroadcast configs)
};

Layout nth_layout(Layout l, int i) {
  if (l == Layout::Contig) return l;
  int k = (static_cast<int>(l) - 1 + i) % 4;
  return static_cast<Layout>(k + 1);
}

std::vector<Config> plain(std::vector<Shape> shapes, int nin, std::vector<int> core_idx = {}) {
  std::vector<Config> c;
  for (size_t k = 0; k < shapes.size(); k++) {
    Config cf{ShapeSet(nin, shapes[k])};
    cf.core = core_idx.empty() ||
              std::find(core_idx.begin(), core_idx.end(), static_cast<int>(k)) != core_idx.end();
    c.push_back(cf);
  }
  return c;
}
void add_layouts(std::vector<Config>& c, std::vector<Shape> shapes, int nin) {
  for (size_t k = 0; k < shapes.size(); k++)
    for (auto l : {Layout::Permuted, Layout::Strided, Layout::Flipped, Layout::Expanded}) {
      // the core set keeps one non-contiguous layout per shape
      bool core = (k == 0 && l == Layout::Strided) || (k == 1 && l == Layout::Permuted);
      c.push_back({ShapeSet(nin, shapes[k]), l, core});
    }
}

// Elementwise configurations: every shape (empty included), broadcasting, non-contiguous inputs.
std::vector<Config> ewise_configs(int nin) {
  // core for other dtypes: (), (7,), (2,3,4), (0,3)
  auto c = plain({{}, {1}, {7}, {3, 5}, {2, 3, 4}, {1, 5}, {4, 1}, {17, 33}, {0, 3}}, nin, {0, 2, 4, 8});
  if (nin == 2) {
    for (ShapeSet s : std::vector<ShapeSet>{{{3, 5}, {5}},
                                            {{5}, {3, 5}},
                                            {{3, 1}, {1, 5}},
                                            {{2, 3, 4}, {3, 1}},
                                            {{}, {3, 5}},
                                            {{3, 5}, {}},
                                            {{0, 3}, {3}}})
      c.push_back({s, Layout::Contig, s[0] == Shape{3, 1} || s[0].empty()});
  } else if (nin == 3) {
    for (ShapeSet s :
         std::vector<ShapeSet>{{{3, 1}, {1, 5}, {5}}, {{2, 3, 4}, {}, {3, 1}}, {{}, {4}, {2, 1, 4}}})
      c.push_back({s, Layout::Contig, s[0] == Shape{3, 1}});
  }
  add_layouts(c, {{3, 5}, {2, 3, 4}}, nin);
  return c;
}

// Reduction configurations for an op over `dims` that needs at least `min_dim` dims.
std::vector<Config> reduce_configs(int min_dim, bool allow_empty) {
  std::vector<Shape> shapes;
  if (min_dim <= 0) shapes.push_back({});
  if (min_dim <= 1) shapes.push_back({7});
  if (min_dim <= 2) {
    for (Shape s : std::vector<Shape>{{3, 5}, {1, 5}, {4, 1}, {17, 33}}) shapes.push_back(s);
    if (allow_empty) shapes.push_back({0, 3});
  }
  shapes.push_back({2, 3, 4});
  std::vector<int> core;
  for (size_t k = 0; k < shapes.size(); k++)
    if (shapes[k] == Shape{3, 5} || shapes[k] == Shape{2, 3, 4} || shapes[k] == Shape{17, 33})
      core.push_back(int(k));
  auto c = plain(shapes, 1, core);
  if (min_dim <= 2)
    add_layouts(c, {{3, 5}, {2, 3, 4}}, 1);
  else
    add_layouts(c, {{2, 3, 4}}, 1);
  return c;
}

std::vector<Config> shapes_only(std::vector<ShapeSet> sets, bool layouts = true) {
  std::vector<Config> c;
  for (auto& s : sets) c.push_back({s});
  if (layouts)
    for (auto& s : sets) {
      bool ok = true;
      for (auto& x : s) ok &= !x.empty() && x[0] > 0;
      if (ok) {
        c.push_back({s, Layout::Permuted, true});
        c.push_back({s, Layout::Strided, false});
        c.push_back({s, Layout::Expanded, false});
      }
    }
  return c;
}

// Quantize to small integers so comparisons of random floats sometimes find equal values.
Tensor q(const Tensor& x) { return is_float(x.dtype()) ? (x * 2.0).trunc() : x; }

Row unary(std::string name, double lo, double hi, Fn fn, unsigned dt, Host host = nullptr,
          bool transc = false) {
  return Row{std::move(name), 1, lo, hi, std::move(fn), dt, ewise_configs(1), transc, 1, std::move(host)};
}
Row binary(std::string name, double lo, double hi, Fn fn, unsigned dt, Host host = nullptr,
           bool transc = false) {
  return Row{std::move(name), 2, lo, hi, std::move(fn), dt, ewise_configs(2), transc, 1, std::move(host)};
}
Row reduction(std::string name, Fn fn, unsigned dt, int min_dim, bool allow_empty, double lo = -2,
              double hi = 2) {
  return Row{std::move(name), 1, lo, hi, std::move(fn), dt, reduce_configs(min_dim, allow_empty), false, 10};
}
Row shaped(std::string name, int nin, Fn fn, unsigned dt, std::vector<ShapeSet> sets, bool layouts = true,
           double lo = -2, double hi = 2) {
  return Row{std::move(name), nin, lo, hi, std::move(fn), dt, shapes_only(std::move(sets), layouts)};
}

double sigmoid_h(double x) { return 1 / (1 + std::exp(-x)); }
double pow_h(double b, double e) { return std::pow(b, e); }

std::vector<Row> table() {
  std::vector<Row> r;
  // --- arithmetic ---
  r.push_back(binary(
      "add", -5, 5, [](const Ts& x) { return x[0] + x[1]; }, kAll & ~kBool,
      [](auto& v) { return v[0] + v[1]; }));
  r.push_back(binary(
      "add_bool", 0, 1, [](const Ts& x) { return x[0] + x[1]; }, kBool));
  r.push_back(binary(
      "sub", -5, 5, [](const Ts& x) { return x[0] - x[1]; }, kNumeric, [](auto& v) { return v[0] - v[1]; }));
  r.push_back(binary(
      "mul", -5, 5, [](const Ts& x) { return x[0] * x[1]; }, kAll, [](auto& v) { return v[0] * v[1]; }));
  r.push_back(binary(
      "div", -5, 5, [](const Ts& x) { return x[0] / x[1]; }, kFloats, [](auto& v) { return v[0] / v[1]; }));
  r.push_back(binary(
      "div_int", 1, 9, [](const Ts& x) { return x[0] / x[1]; }, kInts | kF32));
  r.push_back(unary(
      "add_scalar_int", -5, 5, [](const Ts& x) { return x[0] + 2; }, kNumeric,
      [](auto& v) { return v[0] + 2; }));
  r.push_back(unary(
      "radd_scalar_float", -5, 5, [](const Ts& x) { return 1.5 + x[0]; }, kAll,
      [](auto& v) { return 1.5 + v[0]; }));
  r.push_back(unary(
      "sub_scalar", -5, 5, [](const Ts& x) { return x[0] - 1.5; }, kNumeric,
      [](auto& v) { return v[0] - 1.5; }));
  r.push_back(unary(
      "sub_scalar_int", -5, 5, [](const Ts& x) { return x[0] - 3; }, kNumeric,
      [](auto& v) { return v[0] - 3; }));
  r.push_back(unary(
      "rsub_scalar", -5, 5, [](const Ts& x) { return 3 - x[0]; }, kNumeric,
      [](auto& v) { return 3 - v[0]; }));
  r.push_back(unary(
      "rsub_scalar_float", -5, 5, [](const Ts& x) { return 2.5 - x[0]; }, kFloats | kI32,
      [](auto& v) { return 2.5 - v[0]; }));
  r.push_back(unary(
      "mul_scalar", -5, 5, [](const Ts& x) { return x[0] * -2; }, kNumeric,
      [](auto& v) { return v[0] * -2; }));
  r.push_back(unary(
      "rmul_scalar_float", -5, 5, [](const Ts& x) { return 0.25 * x[0]; }, kAll,
      [](auto& v) { return 0.25 * v[0]; }));
  r.push_back(unary(
      "div_scalar", -5, 5, [](const Ts& x) { return x[0] / 3; }, kNumeric, [](auto& v) { return v[0] / 3; }));
  r.push_back(unary(
      "div_scalar_float", -5, 5, [](const Ts& x) { return x[0] / 0.5; }, kNumeric,
      [](auto& v) { return v[0] / 0.5; }));
  r.push_back(unary(
      "rdiv_scalar", 0.5, 5, [](const Ts& x) { return 2 / x[0]; }, kFloats | kI32 | kU8,
      [](auto& v) { return 2 / v[0]; }));
  r.push_back(unary(
      "neg", -5, 5, [](const Ts& x) { return -x[0]; }, kNumeric, [](auto& v) { return -v[0]; }));
  r.push_back(unary(
      "neg_method", -5, 5, [](const Ts& x) { return x[0].neg(); }, kFloats | kI32,
      [](auto& v) { return -v[0]; }));
  // --- math ---
  auto fl = [](double (*f)(double)) { return [f](const std::vector<double>& v) { return f(v[0]); }; };
  r.push_back(unary(
      "exp", -5, 5, [](const Ts& x) { return x[0].exp(); }, kFloats | kI32, fl(std::exp), true));
  r.push_back(unary(
      "exp2", -5, 5, [](const Ts& x) { return x[0].exp2(); }, kFloats | kI32, fl(std::exp2), true));
  r.push_back(unary(
      "log", 0.01, 10, [](const Ts& x) { return x[0].log(); }, kFloats | kI32, fl(std::log), true));
  r.push_back(unary(
      "log2", 0.01, 10, [](const Ts& x) { return x[0].log2(); }, kFloats | kI32, fl(std::log2), true));
  r.push_back(unary(
      "sqrt", 0, 10, [](const Ts& x) { return x[0].sqrt(); }, kFloats | kI32, fl(std::sqrt), true));
  r.push_back(unary(
      "rsqrt", 0.01, 10, [](const Ts& x) { return x[0].rsqrt(); }, kFloats | kI32,
      [](auto& v) { return 1 / std::sqrt(v[0]); }, true));
  r.push_back(unary(
      "reciprocal", 0.1, 10, [](const Ts& x) { return x[0].reciprocal(); }, kFloats | kI32,
      [](auto& v) { return 1 / v[0]; }));
  r.push_back(unary(
      "reciprocal_neg", -10, -0.1, [](const Ts& x) { return x[0].reciprocal(); }, kFloats,
      [](auto& v) { return 1 / v[0]; }));
  r.push_back(unary(
      "sin", -6, 6, [](const Ts& x) { return x[0].sin(); }, kFloats | kI32, fl(std::sin), true));
  r.push_back(unary(
      "cos", -6, 6, [](const Ts& x) { return x[0].cos(); }, kFloats | kI32, fl(std::cos), true));
  r.push_back(unary(
      "tanh", -5, 5, [](const Ts& x) { return x[0].tanh(); }, kFloats, fl(std::tanh), true));
  r.push_back(unary(
      "sigmoid", -8, 8, [](const Ts& x) { return x[0].sigmoid(); }, kFloats, fl(sigmoid_h), true));
  r.push_back(unary(
      "relu", -5, 5, [](const Ts& x) { return x[0].relu(); }, kNumeric,
      [](auto& v) { return v[0] > 0 ? v[0] : 0.0; }));
  r.push_back(unary(
      "abs", -5, 5, [](const Ts& x) { return x[0].abs(); }, kNumeric, fl(std::fabs)));
  r.push_back(unary(
      "trunc", -5, 5, [](const Ts& x) { return x[0].trunc(); }, kNumeric, fl(std::trunc)));
  for (double e : {2.0, 3.0, 0.5, -1.0, 2.5, 1.0, 0.0, -2.0}) {
    std::string n = "pow_scalar_" + std::to_string(e);
    r.push_back(unary(
        n, 0.1, 3, [e](const Ts& x) { return x[0].pow(e); }, kFloats, [e](auto& v) { return pow_h(v[0], e); },
        true));
  }
  r.push_back(unary(
      "pow_scalar_int2_on_ints", -5, 5, [](const Ts& x) { return x[0].pow(2); }, kInts | kF32,
      [](auto& v) { return v[0] * v[0]; }));
  // integer ** integer stays integer in PyTorch
  r.push_back(unary(
      "pow_scalar_int4_on_ints", -3, 3, [](const Ts& x) { return x[0].pow(4); }, kInts,
      [](auto& v) { return v[0] * v[0] * v[0] * v[0]; }));
  r.push_back(unary(
      "pow_scalar_int0_on_ints", -3, 3, [](const Ts& x) { return x[0].pow(0); }, kInts,
      [](auto&) { return 1.0; }));
  r.push_back(unary(
      "pow_scalar_int3_neg_base", -3, 3, [](const Ts& x) { return x[0].pow(3); }, kFloats,
      [](auto& v) { return v[0] * v[0] * v[0]; }));
  r.push_back(unary(
      "pow_scalar_neg_base_int_exp4", -3, -0.1, [](const Ts& x) { return x[0].pow(4.0); }, kFloats,
      [](auto& v) { return pow_h(v[0], 4.0); }, true));
  r.push_back(unary(
      "pow_scalar_neg_base_int_exp5", -3, -0.1, [](const Ts& x) { return x[0].pow(5.0); }, kFloats,
      [](auto& v) { return pow_h(v[0], 5.0); }, true));
  r.push_back(unary(
      "pow_scalar_neg_base_frac_exp", -3, -0.1, [](const Ts& x) { return x[0].pow(2.5); }, kFloats,
      [](auto& v) { return pow_h(v[0], 2.5); }, true));
  r.push_back(binary(
      "pow_tensor_pos_base", 0.1, 3, [](const Ts& x) { return x[0].pow(x[1] - 1.0); }, kFloats,
      [](auto& v) { return pow_h(v[0], v[1] - 1.0); }, true));
  // negative bases with integral exponents -3..3 (exponent = trunc of a value in [-3.9, 3.9])
  r.push_back(binary(
      "pow_tensor_neg_base_int_exp", -3, 3, [](const Ts& x) { return x[0].pow((x[1] * 1.3).trunc()); },
      kF32 | kF64, [](auto& v) { return pow_h(v[0], std::trunc(v[1] * 1.3)); }, true));
  // the whole range of each integer dtype: wrap-around at the dtype's width
  r.push_back(binary(
      "add_wrap", -1e30, 1e30, [](const Ts& x) { return x[0] + x[1]; }, kInts));
  r.push_back(binary(
      "sub_wrap", -1e30, 1e30, [](const Ts& x) { return x[0] - x[1]; }, kInts));
  r.push_back(binary(
      "mul_wrap", -1e30, 1e30, [](const Ts& x) { return x[0] * x[1]; }, kInts));
  r.push_back(unary(
      "neg_wrap", -1e30, 1e30, [](const Ts& x) { return -x[0]; }, kInts));
  r.push_back(unary(
      "abs_wrap", -1e30, 1e30, [](const Ts& x) { return x[0].abs(); }, kInts));
  r.push_back(binary(
      "maximum_wide", -1e30, 1e30, [](const Ts& x) { return maximum(x[0], x[1]); }, kInts));
  r.push_back(binary(
      "minimum_wide", -1e30, 1e30, [](const Ts& x) { return minimum(x[0], x[1]); }, kInts));
  r.push_back(binary(
      "lt_wide", -1e30, 1e30, [](const Ts& x) { return x[0] < x[1]; }, kInts));
  r.push_back(binary(
      "le_wide", -1e30, 1e30, [](const Ts& x) { return x[0] <= x[1]; }, kInts));
  r.push_back(unary(
      "tanh_small", -1e-3, 1e-3, [](const Ts& x) { return x[0].tanh(); }, kF32 | kF64, fl(std::tanh), true));
  r.push_back(unary(
      "exp_wide", -80, 80, [](const Ts& x) { return x[0].exp(); }, kF32 | kF64, fl(std::exp), true));
  r.push_back(unary(
      "sin_wide", -100, 100, [](const Ts& x) { return x[0].sin(); }, kF32 | kF64, fl(std::sin), true));
  r.push_back(unary(
      "cos_wide", -100, 100, [](const Ts& x) { return x[0].cos(); }, kF32 | kF64, fl(std::cos), true));
  r.push_back(unary(
      "log_tiny", 1e-30, 1e-20, [](const Ts& x) { return x[0].log(); }, kF32 | kF64, fl(std::log), true));
  // --- min / max / comparisons ---
  r.push_back(binary(
      "maximum", -5, 5, [](const Ts& x) { return maximum(x[0], x[1]); }, kAll,
      [](auto& v) { return std::max(v[0], v[1]); }));
  r.push_back(binary(
      "minimum", -5, 5, [](const Ts& x) { return minimum(x[0], x[1]); }, kAll,
      [](auto& v) { return std::min(v[0], v[1]); }));
  r.push_back(binary(
      "maximum_method", -5, 5, [](const Ts& x) { return x[0].maximum(x[1]); }, kF32 | kI32));
  r.push_back(binary(
      "minimum_method", -5, 5, [](const Ts& x) { return x[0].minimum(x[1]); }, kF32 | kI32));
  r.push_back(binary(
      "eq", -2, 2, [](const Ts& x) { return q(x[0]) == q(x[1]); }, kAll));
  r.push_back(binary(
      "ne", -2, 2, [](const Ts& x) { return q(x[0]) != q(x[1]); }, kAll));
  r.push_back(binary(
      "lt", -2, 2, [](const Ts& x) { return q(x[0]) < q(x[1]); }, kAll));
  r.push_back(binary(
      "le", -2, 2, [](const Ts& x) { return q(x[0]) <= q(x[1]); }, kAll));
  r.push_back(binary(
      "gt", -2, 2, [](const Ts& x) { return q(x[0]) > q(x[1]); }, kAll));
  r.push_back(binary(
      "ge", -2, 2, [](const Ts& x) { return q(x[0]) >= q(x[1]); }, kAll));
  r.push_back(binary(
      "eq_method", -2, 2, [](const Ts& x) { return q(x[0]).eq(q(x[1])); }, kF32 | kI64));
  r.push_back(binary(
      "ne_method", -2, 2, [](const Ts& x) { return q(x[0]).ne(q(x[1])); }, kF32 | kI64));
  r.push_back(binary(
      "lt_method", -2, 2, [](const Ts& x) { return q(x[0]).lt(q(x[1])); }, kF32 | kI64));
  r.push_back(binary(
      "le_method", -2, 2, [](const Ts& x) { return q(x[0]).le(q(x[1])); }, kF32 | kI64));
  r.push_back(binary(
      "gt_method", -2, 2, [](const Ts& x) { return q(x[0]).gt(q(x[1])); }, kF32 | kI64));
  r.push_back(binary(
      "ge_method", -2, 2, [](const Ts& x) { return q(x[0]).ge(q(x[1])); }, kF32 | kI64));
  r.push_back(unary(
      "eq_scalar", -2, 2, [](const Ts& x) { return q(x[0]) == 1; }, kAll));
  r.push_back(unary(
      "ne_scalar", -2, 2, [](const Ts& x) { return q(x[0]) != 1; }, kAll));
  r.push_back(unary(
      "lt_scalar", -2, 2, [](const Ts& x) { return x[0] < 0.5; }, kAll));
  r.push_back(unary(
      "le_scalar", -2, 2, [](const Ts& x) { return q(x[0]) <= 1; }, kAll));
  r.push_back(unary(
      "gt_scalar", -2, 2, [](const Ts& x) { return x[0] > -0.5; }, kAll));
  r.push_back(unary(
      "ge_scalar", -2, 2, [](const Ts& x) { return q(x[0]) >= 1; }, kAll));
  // --- where / logical / bitwise ---
  r.push_back(Row{"where", 3, -3, 3, [](const Ts& x) { return where(x[0] > 0, x[1], x[2]); }, kAll,
                  ewise_configs(3)});
  r.push_back(Row{"where_bool_cond", 3, -3, 3,
                  [](const Ts& x) { return where(x[0].to(DType::Bool), x[1], x[2]); }, kF32 | kI32 | kBool,
                  ewise_configs(3)});
  r.push_back(binary(
      "where_scalar_b", -3, 3, [](const Ts& x) { return where(x[0] > 0, x[1], 2.5); }, kAll));
  r.push_back(binary(
      "where_scalar_a", -3, 3, [](const Ts& x) { return where(x[0] < 1, 7, x[1]); }, kAll));
  r.push_back(unary(
      "logical_not", -2, 2, [](const Ts& x) { return q(x[0]).logical_not(); }, kAll));
  r.push_back(binary(
      "logical_and", -2, 2, [](const Ts& x) { return q(x[0]).logical_and(q(x[1])); }, kAll));
  r.push_back(binary(
      "logical_or", -2, 2, [](const Ts& x) { return q(x[0]).logical_or(q(x[1])); }, kAll));
  r.push_back(binary(
      "logical_xor", -2, 2, [](const Ts& x) { return q(x[0]).logical_xor(q(x[1])); }, kAll));
  r.push_back(unary(
      "bitwise_not", -100, 100, [](const Ts& x) { return ~x[0]; }, kInts | kBool));
  r.push_back(binary(
      "bitwise_and", -100, 100, [](const Ts& x) { return x[0] & x[1]; }, kInts | kBool));
  r.push_back(binary(
      "bitwise_or", -100, 100, [](const Ts& x) { return x[0] | x[1]; }, kInts | kBool));
  r.push_back(binary(
      "bitwise_xor", -100, 100, [](const Ts& x) { return x[0] ^ x[1]; }, kInts | kBool));
  r.push_back(binary(
      "mixed_dtype_add_f32_i32", -5, 5, [](const Ts& x) { return x[0].to(DType::F32) + x[1].to(DType::I32); },
      kF32));
  r.push_back(binary(
      "mixed_dtype_mul_i8_u8", -5, 5, [](const Ts& x) { return x[0].to(DType::I8) * x[1].to(DType::U8); },
      kI32));
  r.push_back(binary(
      "mixed_dtype_f16_bf16", -5, 5, [](const Ts& x) { return x[0].to(DType::F16) + x[1].to(DType::BF16); },
      kF32));
  // --- reductions ---
  using D = std::vector<int64_t>;
  struct Red {
    const char* name;
    std::function<Tensor(const Tensor&, D, bool)> f;
    unsigned dt;
    bool empty_ok;  // defined on empty inputs (sum/prod/mean: yes; max/min: no)
  };
  std::vector<Red> reds = {
      {"sum", [](const Tensor& x, D d, bool k) { return x.sum(d, k); }, kAll, true},
      {"max", [](const Tensor& x, D d, bool k) { return x.max(d, k); }, kAll, false},
      {"min", [](const Tensor& x, D d, bool k) { return x.min(d, k); }, kAll, false},
      {"prod", [](const Tensor& x, D d, bool k) { return x.prod(d, k); }, kAll, true},
      {"mean", [](const Tensor& x, D d, bool k) { return x.mean(d, k); }, kFloats, true},
  };
  for (auto& rd : reds) {
    struct Dims {
      const char* tag;
      D dims;
      int min_dim;
    };
    for (auto dd : std::vector<Dims>{{"dim0", {0}, 1},
                                     {"dim1", {1}, 2},
                                     {"dim-1", {-1}, 1},
                                     {"dims0,-1", {0, -1}, 2},
                                     {"dims0,2", {0, 2}, 3},
                                     {"all", {}, 0},
                                     {"all_explicit", {0, 1, 2}, 3}})
      for (bool keep : {false, true}) {
        auto f = rd.f;
        D dims = dd.dims;
        // prod over many elements: keep the values near 1 so the product stays finite
        double lo = std::string(rd.name) == "prod" ? 0.8 : -2, hi = std::string(rd.name) == "prod" ? 1.25 : 2;
        // (the empty input is only valid when no reduced dim is required to be non-empty)
        r.push_back(reduction(
            std::string(rd.name) + "_" + dd.tag + (keep ? "_keepdim" : ""),
            [f, dims, keep](const Ts& x) { return f(x[0], dims, keep); }, rd.dt, dd.min_dim,
            rd.empty_ok && dd.min_dim <= 2, lo, hi));
        if (std::string(rd.name) == "prod") {
          r.back().dtypes =
              kFloats | kI32 | kI64 | kBool;  // i8/u8 products wrap only in i64: fine, but keep ints small
        }
      }
    r.push_back(reduction(
        std::string(rd.name) + "_int_overload",
        [f = rd.f](const Ts& x) { return x[0].dim() >= 2 ? f(x[0], {1}, false) : f(x[0], {0}, false); },
        kF32 | kI32, 1, false));
  }
  r.push_back(reduction(
      "sum_wide_ints", [](const Ts& x) { return x[0].sum(-1); }, kI8 | kU8 | kI32, 1, true, -1e30, 1e30));
  r.push_back(reduction(
      "max_wide_ints", [](const Ts& x) { return x[0].max(0); }, kInts, 1, false, -1e30, 1e30));
  r.push_back(reduction(
      "min_wide_ints", [](const Ts& x) { return x[0].min(-1); }, kInts, 1, false, -1e30, 1e30));
  r.push_back(reduction(
      "sum_method_int", [](const Ts& x) { return x[0].sum(-1, true); }, kF32 | kI8 | kU8, 1, true));
  r.push_back(reduction(
      "max_method_int", [](const Ts& x) { return x[0].max(0); }, kF32 | kI8 | kU8, 1, false));
  r.push_back(reduction(
      "min_method_int", [](const Ts& x) { return x[0].min(-1, true); }, kF32 | kI8 | kU8, 1, false));
  r.push_back(reduction(
      "prod_method_int", [](const Ts& x) { return x[0].prod(0); }, kF32 | kI8, 1, true));
  r.push_back(reduction(
      "mean_method_int", [](const Ts& x) { return x[0].mean(-1); }, kFloats, 1, true));
  for (int64_t d : {0, 1, -1, 2}) {
    Row row = reduction(
        "softmax_" + std::to_string(d), [d](const Ts& x) { return x[0].softmax(d); }, kFloats,
        d == 2 ? 3 : (d == 1 ? 2 : 1), false, -4, 4);
    row.transcendental = true;
    row.atol_scale = 1;
    r.push_back(row);
  }
  // --- fused compositions: several reduces in one kernel, reduces feeding reduces, larger shapes ---
  auto comp = [&](std::string n, Fn f, std::vector<ShapeSet> sets, unsigned dt = kF32 | kF64 | kI32) {
    int nin = static_cast<int>(sets[0].size());
    Row row = shaped(std::move(n), nin, std::move(f), dt, std::move(sets), true, -2, 2);
    row.atol_scale = 10;
    row.transcendental = true;
    r.push_back(row);
  };
  comp("two_reduces_one_input", [](const Ts& x) { return x[0].sum(1) + x[0].max(1); },
       {{{3, 5}}, {{17, 33}}, {{64, 48}}, {{5, 1000}}});
  comp("reduce_and_transposed_reduce", [](const Ts& x) { return x[0].sum(-1) * 2 + x[0].t().max(0); },
       {{{3, 3}}, {{33, 33}}});
  comp("reduces_of_two_inputs", [](const Ts& x) { return x[0].sum(1) - x[1].min(1); },
       {{{3, 5}, {3, 5}}, {{64, 48}, {64, 48}}});
  comp("reduces_same_size_other_axes", [](const Ts& x) { return x[0].sum(1) + x[1].sum(0); },
       {{{4, 6}, {6, 4}}, {{17, 17}, {17, 17}}});
  comp("reduce_of_reduce", [](const Ts& x) { return x[0].sum(1).max(0); },
       {{{3, 5}}, {{17, 33}}, {{2, 3, 4}}});
  comp(
      "variance", [](const Ts& x) { return (x[0] - x[0].mean(1, true)).pow(2).mean(1); },
      {{{3, 5}}, {{17, 33}}, {{64, 48}}}, kF32 | kF64);
  comp(
      "normalize_by_sum", [](const Ts& x) { return x[0] / (x[0].abs().sum(0, true) + 1); },
      {{{3, 5}}, {{17, 33}}, {{64, 48}}}, kF32 | kF64);
  comp("sum_then_broadcast_add", [](const Ts& x) { return x[0] + x[0].sum(-1, true) + x[0].max(0, true); },
       {{{3, 5}}, {{17, 33}}, {{2, 3, 4}}});
  comp("ewise_large", [](const Ts& x) { return (x[0] * x[1] + x[0]).relu() - x[1] * 3; },
       {{{64, 48}, {64, 48}}, {{1000}, {1000}}, {{3, 256}, {256}}, {{257, 3}, {257, 1}}});
  comp("reduce_large", [](const Ts& x) { return x[0].sum(0) + x[0].max(0); },
       {{{1000, 3}}, {{64, 48}}, {{256, 17}}, {{4096}}});
  comp("matmul_large", [](const Ts& x) { return x[0].matmul(x[1]); },
       {{{64, 48}, {48, 32}}, {{31, 65}, {65, 7}}, {{128, 16}, {16, 128}}});
  comp(
      "matmul_chain", [](const Ts& x) { return x[0].matmul(x[1]).relu().matmul(x[1].t()); },
      {{{5, 7}, {7, 3}}, {{17, 33}, {33, 9}}}, kF32 | kF64);
  comp(
      "softmax_matmul", [](const Ts& x) { return x[0].matmul(x[1]).softmax(-1).sum(0); },
      {{{5, 7}, {7, 3}}, {{17, 33}, {33, 9}}}, kF32 | kF64);
  // --- movement ---
  auto mv = [&](std::string n, Fn f, std::vector<ShapeSet> sets, bool layouts = true) {
    r.push_back(shaped(std::move(n), 1, std::move(f), kAll, std::move(sets), layouts, -5, 5));
  };
  mv("reshape_flat", [](const Ts& x) { return x[0].reshape({-1}); }, {{{3, 5}}, {{2, 3, 4}}, {{}}, {{0, 3}}});
  mv("reshape_5_3", [](const Ts& x) { return x[0].reshape({5, 3}); }, {{{3, 5}}});
  mv("reshape_4_-1_2", [](const Ts& x) { return x[0].reshape({4, -1, 2}); }, {{{2, 3, 4}}});
  mv("view_-1_4", [](const Ts& x) { return x[0].view({-1, 4}); }, {{{2, 3, 4}}, {{0, 4}}});
  mv("reshape_scalar", [](const Ts& x) { return x[0].reshape({}); }, {{{1}}, {{1, 1}}});
  mv("reshape_add_ones", [](const Ts& x) { return x[0].reshape({1, 3, 1, 5, 1}); }, {{{3, 5}}});
  mv("permute_201", [](const Ts& x) { return x[0].permute({2, 0, 1}); }, {{{2, 3, 4}}});
  mv("permute_neg", [](const Ts& x) { return x[0].permute({-1, 0, -2}); }, {{{2, 3, 4}}});
  mv("transpose_0_2", [](const Ts& x) { return x[0].transpose(0, 2); }, {{{2, 3, 4}}});
  mv("transpose_-1_-2", [](const Ts& x) { return x[0].transpose(-1, -2); }, {{{2, 3, 4}}, {{17, 33}}});
  mv("t", [](const Ts& x) { return x[0].t(); }, {{{3, 5}}, {{1, 5}}, {{17, 33}}, {{0, 3}}});
  mv("expand", [](const Ts& x) { return x[0].expand({2, 3, 5}); }, {{{3, 1}}, {{1, 5}}, {{}}, {{5}}});
  mv("expand_-1", [](const Ts& x) { return x[0].expand({2, -1, 5}); }, {{{3, 1}}, {{3, 5}}});
  mv("broadcast_to", [](const Ts& x) { return x[0].broadcast_to({4, 3, 5}); }, {{{1, 5}}, {{3, 1}}});
  mv("unsqueeze_0", [](const Ts& x) { return x[0].unsqueeze(0); }, {{{3, 5}}, {{}}});
  mv("unsqueeze_-1", [](const Ts& x) { return x[0].unsqueeze(-1); }, {{{3, 5}}, {{7}}});
  mv("unsqueeze_1", [](const Ts& x) { return x[0].unsqueeze(1); }, {{{2, 3, 4}}});
  mv("squeeze", [](const Ts& x) { return x[0].squeeze(); }, {{{1, 5}}, {{4, 1}}, {{1, 1}}, {{3, 1, 5}}});
  mv("squeeze_dim", [](const Ts& x) { return x[0].squeeze(1); }, {{{4, 1}}, {{3, 5}}, {{3, 1, 5}}});
  mv("squeeze_-1", [](const Ts& x) { return x[0].squeeze(-1); }, {{{4, 1}}, {{7}}, {{1}}});
  mv("flatten", [](const Ts& x) { return x[0].flatten(); }, {{{2, 3, 4}}, {{}}, {{7}}});
  mv("flatten_1", [](const Ts& x) { return x[0].flatten(1); }, {{{2, 3, 4}}});
  mv("flatten_0_1", [](const Ts& x) { return x[0].flatten(0, 1); }, {{{2, 3, 4}}});
  mv("pad_last", [](const Ts& x) { return x[0].pad({1, 2}); }, {{{3, 5}}, {{7}}, {{2, 3, 4}}, {{0, 3}}});
  mv("pad_two_dims", [](const Ts& x) { return x[0].pad({1, 0, 2, 1}); }, {{{3, 5}}, {{2, 3, 4}}});
  mv("pad_value", [](const Ts& x) { return x[0].pad({0, 2, 1, 1}, 3); }, {{{3, 5}}, {{2, 3, 4}}});
  r.push_back(shaped("pad_value_frac", 1,
                     [](const Ts& x) {
                       return x[0].pad({2, 1}, -1.5);
                     },
                     kFloats, {{{3, 5}}, {{7}}}));
  mv("pad_zero_noop", [](const Ts& x) { return x[0].pad({0, 0}); }, {{{3, 5}}});
  mv("slice_neg_start", [](const Ts& x) { return x[0].slice(0, -2, std::nullopt); }, {{{3, 5}}, {{7}}});
  mv("slice_neg_end", [](const Ts& x) { return x[0].slice(1, 1, -1); }, {{{3, 5}}, {{2, 3, 4}}});
  mv("slice_step2", [](const Ts& x) { return x[0].slice(-1, 1, std::nullopt, 2); },
     {{{3, 5}}, {{7}}, {{17, 33}}, {{2, 3, 4}}});
  mv("slice_step3", [](const Ts& x) { return x[0].slice(0, std::nullopt, std::nullopt, 3); },
     {{{7}}, {{17, 33}}, {{2, 3, 4}}});
  mv("slice_step3_offset", [](const Ts& x) { return x[0].slice(-1, 2, 100, 3); }, {{{17, 33}}, {{7}}});
  mv("slice_past_end", [](const Ts& x) { return x[0].slice(0, -100, 100); }, {{{3, 5}}, {{7}}});
  mv("slice_empty", [](const Ts& x) { return x[0].slice(-1, 4, 2); }, {{{3, 5}}, {{7}}});
  mv("slice_start_past_end", [](const Ts& x) { return x[0].slice(0, 10, std::nullopt, 2); }, {{{3, 5}}});
  mv("index_slice_int", [](const Ts& x) { return x[0].index({Slice(1, 3), -1}); }, {{{3, 5}}, {{2, 3, 4}}});
  mv("index_neg_int", [](const Ts& x) { return x[0].index({-1}); }, {{{3, 5}}, {{2, 3, 4}}, {{7}}});
  mv("index_int_step",
     [](const Ts& x) {
       return x[0].index({0, Slice(std::nullopt, std::nullopt, 2)});
     },
     {{{3, 5}}, {{2, 3, 4}}});
  mv("index_last_neg", [](const Ts& x) { return x[0].index({Slice(), Slice(), -2}); }, {{{2, 3, 4}}});
  mv("index_neg_slice",
     [](const Ts& x) {
       return x[0].index({Slice(-2, std::nullopt), Slice(-4, -1, 2)});
     },
     {{{3, 5}}, {{2, 3, 4}}});
  mv("flip_0", [](const Ts& x) { return x[0].flip({0}); }, {{{3, 5}}, {{7}}, {{2, 3, 4}}});
  mv("flip_-1", [](const Ts& x) { return x[0].flip({-1}); }, {{{3, 5}}, {{17, 33}}, {{2, 3, 4}}});
  mv("flip_0_2", [](const Ts& x) { return x[0].flip({0, 2}); }, {{{2, 3, 4}}});
  mv("contiguous", [](const Ts& x) { return x[0].contiguous(); }, {{{3, 5}}, {{2, 3, 4}}, {{}}, {{0, 3}}});
  mv("movement_chain",
     [](const Ts& x) { return x[0].t().flip({0}).slice(1, 1, std::nullopt, 2).reshape({-1}); },
     {{{3, 5}}, {{17, 33}}});
  mv("movement_then_math", [](const Ts& x) { return (x[0].t() * 2 + x[0].t().flip({1})).sum(0); },
     {{{3, 5}}, {{17, 33}}});
  // --- linear algebra ---
  auto la = [&](std::string n, Fn f, std::vector<ShapeSet> sets) {
    Row row = shaped(std::move(n), 2, std::move(f), kFloats | kI32, std::move(sets), true, -1, 1);
    row.atol_scale = 10;
    r.push_back(row);
  };
  la("dot", [](const Ts& x) { return x[0].dot(x[1]); }, {{{7}, {7}}, {{1}, {1}}, {{33}, {33}}, {{0}, {0}}});
  la("matmul_1d_1d", [](const Ts& x) { return x[0].matmul(x[1]); }, {{{7}, {7}}});
  la("matmul_2d_1d", [](const Ts& x) { return x[0].matmul(x[1]); }, {{{5, 7}, {7}}, {{17, 33}, {33}}});
  la("matmul_1d_2d", [](const Ts& x) { return x[0].matmul(x[1]); }, {{{7}, {7, 3}}, {{33}, {33, 9}}});
  la("matmul_2d_2d", [](const Ts& x) { return matmul(x[0], x[1]); },
     {{{5, 7}, {7, 3}}, {{1, 1}, {1, 1}}, {{17, 33}, {33, 9}}, {{3, 0}, {0, 4}}, {{0, 3}, {3, 2}}});
  la("matmul_batched", [](const Ts& x) { return x[0].matmul(x[1]); },
     {{{2, 3, 4, 5}, {5, 6}}, {{2, 1, 4, 5}, {3, 5, 2}}, {{3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4}}});
  {
    Row row = shaped(
        "linear", 3, [](const Ts& x) { return F::linear(x[0], x[1], x[2]); }, kFloats,
        {{{5, 7}, {3, 7}, {3}}, {{2, 4, 7}, {3, 7}, {3}}, {{17, 33}, {9, 33}, {9}}}, true, -1, 1);
    row.atol_scale = 10;
    r.push_back(row);
  }
  // --- casts: every dtype pair, on small values ---
  for (auto [bit, to] : kDTypes) {
    (void)bit;
    bool unsig = to == DType::U8;
    Row row = shaped(
        std::string("to_") + dtype_name(to), 1, [to](const Ts& x) { return x[0].to(to); }, kAll,
        {{{3, 5}}, {{}}, {{0, 3}}, {{17, 33}}}, true, unsig ? 0 : -100, 100);
    r.push_back(row);
  }
  for (DType to : {DType::I16, DType::U32, DType::U64}) {
    Row row = shaped(
        std::string("to_") + dtype_name(to), 1, [to](const Ts& x) { return x[0].to(to); }, kAll,
        {{{3, 5}}, {{}}}, true, 0, 100);
    r.push_back(row);
  }
  r.push_back(shaped(
      "to_roundtrip_i16", 1, [](const Ts& x) { return x[0].to(DType::I16).to(DType::F32) + 1; }, kAll,
      {{{3, 5}}}, true, -100, 100));
  return r;
}

// --- running the table ---
struct Case {
  std::string label;
  Tensor out;
  std::shared_ptr<const ir::Node> graph;
  Tol tol;
  std::vector<std::vector<double>> host_inputs;  // set when the host oracle applies
};

uint64_t seed_of(const std::string& s, size_t cfg, int input) {
  return std::hash<std::string>{}(s) ^ (cfg * 1000003ull + static_cast<uint64_t>(input) * 7919ull);
}

std::string label_of(const Row& row, const Config& c, DType t) {
  std::string s = row.name + " dtype=" + dtype_name(t) + " shapes=";
  for (size_t i = 0; i < c.shapes.size(); i++) s += (i ? "," : "") + shape_str(c.shapes[i]);
  s += std::string(" layout=") + layout_name(c.layout);
  return s;
}

void run_row(const Row& row) {
  std::vector<Case> cases;
  for (auto [bit, dt] : kDTypes) {
    if (!(row.dtypes & bit)) continue;
    for (size_t ci = 0; ci < row.configs.size(); ci++) {
      const Config& c = row.configs[ci];
      if (dt != DType::F32 && !c.core) continue;
      std::string label = label_of(row, c, dt);
      Ts in;
      bool ok = true;
      for (int i = 0; i < row.nin; i++) {
        Layout l = nth_layout(c.layout, i);
        const Shape& s = c.shapes[static_cast<size_t>(i)];
        bool has_dims = !s.empty() && s[0] > 0;
        in.push_back(
            make_input(s, dt, row.lo, row.hi, seed_of(row.name, ci, i), has_dims ? l : Layout::Contig));
      }
      Tensor out;
      try {
        out = row.fn(in);
      } catch (const std::exception& e) {
        ADD_FAILURE() << label << ": building the graph threw: " << e.what();
        ok = false;
      }
      if (!ok) continue;
      Tol tol = default_tol(out.dtype(), row.transcendental);
      tol.atol *= row.atol_scale;
      Case cs{label, out, out.node(), tol, {}};
      bool unbroadcast = true;
      for (auto& s : c.shapes) unbroadcast &= s == out.shape();
      if (row.host && (dt == DType::F32 || dt == DType::F64) && c.layout == Layout::Contig && unbroadcast)
        for (auto& x : in) cs.host_inputs.push_back(x.to_vector<double>());
      cases.push_back(std::move(cs));
    }
  }
  // one schedule for the whole row; if it fails, realize case by case to find the culprits
  std::vector<Tensor> outs;
  for (auto& c : cases) outs.push_back(c.out);
  try {
    realize(outs);
  } catch (const std::exception&) {
    for (auto& c : cases) {
      try {
        c.out.realize();
      } catch (const std::exception& e) {
        ADD_FAILURE() << c.label << ": realize threw: " << e.what();
      }
    }
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.label);
    if (!expect_matches_reference(c.out, c.graph, c.tol.rtol, c.tol.atol)) continue;
    if (c.host_inputs.empty()) continue;
    // PyTorch semantics on the host
    std::vector<double> want(c.host_inputs[0].size());
    for (size_t k = 0; k < want.size(); k++) {
      std::vector<double> v;
      for (auto& h : c.host_inputs) v.push_back(h[k]);
      want[k] = row.host(v);
    }
    SCOPED_TRACE("host <cmath> oracle");
    Tol t = default_tol(c.out.dtype(), true);
    expect_values(c.out, want, t.rtol * 2, t.atol);
  }
}

class OpTable : public ::testing::TestWithParam<size_t> {};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = table();
  return r;
}

TEST_P(OpTable, MatchesReference) { run_row(rows()[GetParam()]); }

std::string row_test_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = std::to_string(info.param) + "_" + rows()[info.param].name;
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::Range<size_t>(0, rows().size()), row_test_name);

// --- the symbolic column: each f32 row with dim 0 of its inputs standing for a kiln::Var ---
// Contiguous configurations whose inputs share a dim 0 of 2 or more run at that size and one more and
// one less, each its own realize (a variable has one value a schedule; the sizes share kernels),
// each against the reference.
void run_symbolic_row(const Row& row) {
  if (!(row.dtypes & kF32)) return;
  Var S("S", 1, int64_t{1} << 24);
  std::vector<Case> cases;
  for (size_t ci = 0; ci < row.configs.size(); ci++) {
    const Config& c = row.configs[ci];
    if (c.layout != Layout::Contig || c.shapes.empty()) continue;
    int64_t d0 = c.shapes[0].empty() ? 0 : c.shapes[0][0];
    bool shared = d0 >= 2;
    for (auto& sh : c.shapes) shared &= !sh.empty() && sh[0] == d0;
    if (!shared) continue;
    for (int64_t size : {d0, d0 + 1, d0 - 1}) {
      Ts in;
      for (int i = 0; i < row.nin; i++) {
        Shape sh = c.shapes[static_cast<size_t>(i)];
        sh[0] = size;
        in.push_back(random_tensor(sh, DType::F32, row.lo, row.hi,
                                   seed_of(row.name, ci, i) + static_cast<uint64_t>(size))
                         .symbolic(0, S));
      }
      Tensor out;
      try {
        out = row.fn(in);
      } catch (const Error&) {
        continue;  // a row made for its own sizes (a reshape to fixed dims)
      }
      Tol tol = default_tol(out.dtype(), row.transcendental);
      tol.atol *= row.atol_scale;
      std::string label = label_of(row, c, DType::F32) + " symbolic dim 0 = " + std::to_string(size);
      cases.push_back({label, out, out.node(), tol, {}});
    }
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.label);
    try {
      c.out.realize();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "realize threw: " << e.what();
      continue;
    }
    expect_matches_reference(c.out, c.graph, c.tol.rtol, c.tol.atol);
  }
}

TEST_P(OpTable, SymbolicDimMatchesReference) { run_symbolic_row(rows()[GetParam()]); }

// --- gradients: every float row, on small contiguous and broadcast configurations, in f64 ---
void run_gradient_row(const Row& row) {
  if (!(row.dtypes & kF64) && !(row.dtypes & kF32)) return;
  int checked = 0;
  for (size_t ci = 0; ci < row.configs.size() && checked < 2; ci++) {
    const Config& c = row.configs[ci];
    if (c.layout != Layout::Contig) continue;
    int64_t total = 0;
    bool empty = false;
    for (auto& s : c.shapes) {
      int64_t n = 1;
      for (auto d : s) n *= d;
      total += n;
      empty |= n == 0;
    }
    if (empty || total > 60) continue;
    Ts in;
    for (size_t i = 0; i < c.shapes.size(); i++)
      in.push_back(random_tensor(c.shapes[i], DType::F64, row.lo, row.hi, 1000 + 17 * ci + i));
    Tensor out = row.fn(in);
    if (!is_float(out.dtype())) return;  // comparisons and the like: no gradient
    // finite differences need f64 all the way and a finite function near the inputs
    for (auto& n : ir::toposort({out.node()}))
      if (n->op == ir::Op::CAST && is_float(n->dtype) && n->dtype != DType::F64) return;
    bool finite = true;
    for (double v : out.to_vector<double>()) finite &= std::isfinite(v);
    if (!finite) continue;
    SCOPED_TRACE(row.name + " config " + std::to_string(ci));
    testing::expect_gradients_match(row.fn, in, 77 + ci);
    checked++;
  }
}

TEST_P(OpTable, GradientsMatchFiniteDifferences) { run_gradient_row(rows()[GetParam()]); }

// --- special values ---
TEST(OpsSpecial, NaNPropagates) {
  Tensor x = tensor({1.0f, NAN, -2.0f, NAN});
  Tensor y = tensor({NAN, 0.0f, 5.0f, -1.0f});
  expect_values(x.relu(), {1, kNaN, 0, kNaN});
  expect_values(maximum(x, y), {kNaN, kNaN, 5, kNaN});
  expect_values(minimum(x, y), {kNaN, kNaN, -2, kNaN});
  expect_values(x.max(), {kNaN});
  expect_values(x.min(), {kNaN});
  expect_values(tensor({1.0f, 2.0f, NAN, 0.5f}, {2, 2}).max(1), {2, kNaN});
  expect_values(tensor({NAN, 2.0f, 3.0f, 0.5f}, {2, 2}).min(0), {kNaN, 0.5});
  expect_values(x.sum(), {kNaN});
  expect_values(x == x, {1, 0, 1, 0});
  expect_values(x != x, {0, 1, 0, 1});
  expect_values(x < 2.0, {1, 0, 1, 0});
  expect_values(x <= 1.0, {1, 0, 1, 0});
  expect_values(x >= 1.0, {1, 0, 0, 0});
}

// Rows long enough for the CPU's vectorized loops: a NaN anywhere in a row (first, in the middle,
// last) makes its max and min NaN; the other rows keep their exact max (the row index, placed at
// varying columns), and argmax finds the first NaN or the max.
TEST(OpsSpecial, NaNPropagatesThroughLongRowMaxes) {
  const int64_t rows = 6, n = 1001;
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++) v[static_cast<size_t>(r * n + c)] = -1.0f - static_cast<float>(c % 7);
  for (int64_t r = 0; r < rows; r++) v[static_cast<size_t>(r * n + (r * 173) % n)] = static_cast<float>(r);
  for (int64_t c : {0, 500, 1000}) v[static_cast<size_t>((c == 0 ? 1 : c == 500 ? 3 : 5) * n + c)] = NAN;
  Tensor x = tensor(v, {rows, n});
  expect_values(x.max(1), {0, kNaN, 2, kNaN, 4, kNaN});
  expect_values(x.min(1), {-7, kNaN, -7, kNaN, -7, kNaN});
  expect_values(x.argmax(1).to(DType::F32),
                {0, 0, static_cast<double>((2 * 173) % n), 500, static_cast<double>((4 * 173) % n), 1000});
}

TEST(OpsSpecial, Infinities) {
  Tensor inf = tensor({INFINITY, -INFINITY, 0.0f});
  expect_values(inf.exp(), {kInf, 0, 1});
  expect_values(tensor({0.0f, 1.0f}).log(), {-kInf, 0});
  expect_values(tensor({0.0f, 1.0f}).log2(), {-kInf, 0});
  expect_values(1.0 / tensor({0.0f, -0.0f}), {kInf, -kInf});
  expect_values(tensor({1.0f, -1.0f}) / tensor({0.0f, 0.0f}), {kInf, -kInf});
  expect_values(tensor({1.0f, -1.0f}) / 0.0, {kInf, -kInf});
  expect_values(tensor({0.0f}).reciprocal(), {kInf});
  expect_values(tensor({0.0f}).rsqrt(), {kInf});
  expect_values(tensor({-1.0f}).sqrt(), {kNaN});
  expect_values(tensor({-1.0f}).log(), {kNaN});
  expect_values(inf.sigmoid(), {1, 0, 0.5});
  expect_values(inf.tanh(), {1, -1, 0});
  expect_values(tensor({100.0f, -100.0f}).tanh(), {1, -1});
  expect_values(tensor({1000.0f}).exp(), {kInf});
  expect_values(inf.relu(), {kInf, 0, 0});
  expect_values(inf.max(), {kInf});
  expect_values(inf.min(), {-kInf});
  expect_values(tensor({0.0f, 2.0f}).pow(-1.0), {kInf, 0.5});
  expect_values(tensor({0.0f, NAN}).pow(0.0), {1, 1});  // x ** 0 == 1, even for 0 and NaN
  expect_values(tensor({-8.0f}).pow(1.0 / 3.0), {kNaN});
  expect_values(tensor({-2.0f, -2.0f}).pow(tensor({3.0f, 2.0f})), {-8, 4}, 1e-5);
  expect_values(tensor({0.0f}).pow(tensor({2.0f})), {0});
}

TEST(OpsSpecial, TruncRoundsTowardZero) {
  expect_values(tensor({2.7f, -2.7f, 0.5f, -0.5f, 3.0f}).trunc(), {2, -2, 0, -0.0, 3});
  expect_values(tensor({2.7f, -2.7f, 0.5f, -0.5f}).to(DType::I32), {2, -2, 0, 0});
  expect_values(tensor({0.0f, 0.1f, -3.0f}).to(DType::Bool), {0, 1, 1});
}

TEST(OpsSpecial, CastEdgeCases) {
  expect_values(tensor({NAN, -0.0f, INFINITY}).to(DType::Bool), {1, 0, 1});
  expect_values(tensor({70000.0f, -70000.0f, 1.0009765625f, 1.00048828125f}).to(DType::F16),
                {kInf, -kInf, 1.0009765625, 1});  // overflow to inf; ties round to even
  expect_values(tensor({1.00390625f, 1.01171875f, 3e38f}).to(DType::BF16), {1, 1.015625, 3.0040553e38}, 1e-6);
  expect_values(tensor(std::vector<int32_t>{-1, 256, 300}).to(DType::U8), {255, 0, 44});
  expect_values(tensor(std::vector<int32_t>{-129, 128}).to(DType::I8), {127, -128});
  expect_values(tensor(std::vector<int64_t>{(int64_t{1} << 53) + 1}).to(DType::F64), {9007199254740992.0});
  expect_values(tensor(std::vector<uint8_t>{0, 7}).to(DType::Bool).to(DType::F32), {0, 1});
}

// Reductions checked by hand (the reference interpreter evaluates the same decomposition).
TEST(OpsReduce, KnownValues) {
  Tensor x = tensor({1.0f, -2.0f, 3.0f, 4.0f, 5.0f, -6.0f}, {2, 3});
  expect_values(x.sum(0), {5, 3, -3});
  expect_values(x.sum(1), {2, 3});
  expect_values(x.sum(), {5});
  expect_values(x.max(0), {4, 5, 3});
  expect_values(x.min(1), {-2, -6});
  expect_values(x.min(), {-6});
  expect_values(x.prod(1), {-6, -120});
  expect_values(x.mean(0), {2.5, 1.5, -1.5}, 1e-6);
  expect_values(x.mean(), {5.0 / 6}, 1e-6);
  EXPECT_EQ(x.sum(1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(x.sum({0, 1}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(x.max(-1).shape(), (Shape{2}));
  expect_values(x.softmax(1).sum(1), {1, 1}, 1e-6);
  expect_values(tensor({0.0f, 1.0f}).softmax(0), {1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0))}, 1e-6);
  expect_values(tensor({-INFINITY, 0.0f}).softmax(0), {0, 1});
  expect_values(tensor({1000.0f, 1000.0f}).softmax(0), {0.5, 0.5}, 1e-6);  // stable for large inputs

  Tensor u = tensor(std::vector<uint8_t>{200, 3, 255, 0}, {2, 2});
  expect_values(u.min(1), {3, 0});
  expect_values(u.max(0), {255, 3});
  expect_values(u.sum(), {458});
  EXPECT_EQ(u.sum().dtype(), DType::I64);
  EXPECT_EQ(u.max().dtype(), DType::U8);
  Tensor i8 = tensor(std::vector<int8_t>{-128, 127, 5}, {3});
  expect_values(i8.min(), {-128});
  expect_values(i8.max(), {127});
  expect_values(i8.sum(), {4});
  expect_values(i8.prod(), {-81280});
  Tensor b = tensor({1.0f, 0.0f, 1.0f}).to(DType::Bool);
  expect_values(b.max(), {1});
  expect_values(b.min(), {0});
  expect_values(b.sum(), {2});
  expect_values(b.prod(), {0});
  EXPECT_EQ(b.max().dtype(), DType::Bool);

  // empty inputs: sum 0, prod 1, mean NaN
  Tensor e = zeros({0, 3});
  expect_values(e.sum(0), {0, 0, 0});
  expect_values(e.prod(0), {1, 1, 1});
  expect_values(e.mean(0), {kNaN, kNaN, kNaN});
  expect_values(e.sum(1), {});
  expect_values(e.sum(), {0});
  // a 0-d tensor reduces to itself
  Tensor s = full({}, 2.5);
  expect_values(s.sum(), {2.5});
  expect_values(s.max(), {2.5});
  expect_values(s.sum(0), {2.5});
  expect_values(s.mean(-1), {2.5});
}

TEST(OpsMovement, KnownValues) {
  Tensor x = arange(12).reshape({3, 4});
  expect_values(x.slice(1, 1, std::nullopt, 2), {1, 3, 5, 7, 9, 11});
  expect_values(x.slice(1, -3, -1), {1, 2, 5, 6, 9, 10});
  expect_values(x.slice(0, 1, 100, 3), {4, 5, 6, 7});
  expect_values(x.index({-1}), {8, 9, 10, 11});
  expect_values(x.index({Slice(), -2}), {2, 6, 10});
  expect_values(x.index({Slice(std::nullopt, std::nullopt, 2), Slice(1, std::nullopt, 3)}), {1, 9});
  expect_values(x.flip({0}), {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3});
  expect_values(x.flip({-1}).index({0}), {3, 2, 1, 0});
  expect_values(x.t().index({1}), {1, 5, 9});
  expect_values(x.pad({1, 0}, -1).index({0}), {-1, 0, 1, 2, 3});
  expect_values(x.pad({0, 0, 0, 1}).index({-1}), {0, 0, 0, 0});
  expect_values(x.to(DType::F32).pad({1, 1}, 0.5).index({1}), {0.5, 4, 5, 6, 7, 0.5});
  expect_values(x.reshape({2, -1}).index({1, 0}), {6});
  expect_values(x.unsqueeze(1).expand({3, 2, 4}).index({2, 1}), {8, 9, 10, 11});
  expect_values(x.permute({1, 0}).reshape({-1}).slice(0, 0, 4), {0, 4, 8, 1});
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(0).squeeze().shape(), (Shape{3, 4}));
  EXPECT_EQ(x.flatten().shape(), (Shape{12}));
  EXPECT_EQ(x.slice(1, 4, 2).shape(), (Shape{3, 0}));
  EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, 2).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.slice(1, std::nullopt, std::nullopt, 3).shape(), (Shape{3, 2}));
  EXPECT_EQ(full({}, 1.0).flatten().shape(), (Shape{1}));
  expect_values(matmul(tensor({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}), tensor({5.0f, 6.0f, 7.0f, 8.0f}, {2, 2})),
                {19, 22, 43, 50});
  expect_values(tensor({1.0f, 2.0f}).matmul(tensor({3.0f, 4.0f, 5.0f, 6.0f}, {2, 2})), {13, 16});
  EXPECT_EQ(zeros({2, 1, 4, 5}).matmul(zeros({3, 5, 2})).shape(), (Shape{2, 3, 4, 2}));
  EXPECT_EQ(zeros({2, 3, 4}).matmul(zeros({4})).shape(), (Shape{2, 3}));
  EXPECT_EQ(zeros({4}).matmul(zeros({2, 4, 3})).shape(), (Shape{2, 3}));
}

// PyTorch's results here are correctly rounded (IEEE division, accurate libm); kiln's must be too.
TEST(OpsSpecial, DivisionIsCorrectlyRounded) {
  std::vector<double> v;
  for (int i = 1; i <= 200; i++) v.push_back(i);
  Tensor a = tensor(v), a32 = a.to(DType::F32);
  expect_values(a / a, std::vector<double>(v.size(), 1.0));      // 49.0 / 49.0 == 1
  expect_values(a32 / a32, std::vector<double>(v.size(), 1.0));  // 41.0f / 41.0f == 1
  expect_values((a * 49) / 49, v);
  expect_values((a32 * 41) / 41, v);
  expect_values(tensor(std::vector<int32_t>{49, 98}) / tensor(std::vector<int32_t>{49, 49}), {1, 2});
}

TEST(OpsSpecial, TranscendentalAccuracy) {
  // tanh near 0 keeps its relative precision (tanh(x) ~ x)
  expect_values(tensor({1e-4f, -3e-5f, 1e-6f}).tanh(), {std::tanh(1e-4), std::tanh(-3e-5), std::tanh(1e-6)},
                1e-5);
  expect_values(tensor({1e-4, 1e-8}, {2}).to(DType::F64).tanh(), {std::tanh(1e-4), std::tanh(1e-8)}, 1e-5);
  // cos of large arguments (f32 inputs are exact; the result should be near the true cos)
  expect_values(tensor({1e4f, -3e4f}).cos(), {std::cos(1e4), std::cos(-3e4)}, 0, 1e-5);
  expect_values(tensor({1e4f, -3e4f}).sin(), {std::sin(1e4), std::sin(-3e4)}, 0, 1e-5);
}

TEST(OpsInt, LargeInt64Scalars) {
  const int64_t big = (int64_t{1} << 60) + 1;
  Tensor x = tensor(std::vector<int64_t>{big, 3});
  expect_values(x == static_cast<long long>(big), {1, 0});
  EXPECT_EQ((x + static_cast<long long>(big)).to_vector<int64_t>()[1], big + 3);
  EXPECT_EQ(full({1}, static_cast<long long>(big)).to_vector<int64_t>()[0], big);
}

// --- integer semantics ---
TEST(OpsInt, I8WrapsAround) {
  Tensor a = tensor(std::vector<int8_t>{100, -100, 127, -128});
  Tensor s = a + a;
  EXPECT_EQ(s.dtype(), DType::I8);
  expect_values(s, {-56, 56, -2, 0});
  expect_values(a + 100, {-56, 0, -29, -28});
  expect_values(a * 3, {44, -44, 125, -128});
  expect_values(-a, {-100, 100, -127, -128});
  Tensor u = tensor(std::vector<uint8_t>{250, 3});
  expect_values(u + u, {244, 6});
  expect_values(u - tensor(std::vector<uint8_t>{251, 4}), {255, 255});
}

TEST(OpsInt, Promotion) {
  Tensor i = tensor(std::vector<int32_t>{7, -7});
  EXPECT_EQ((i + 1).dtype(), DType::I32);
  EXPECT_EQ((i + 1.5).dtype(), DType::F32);
  EXPECT_EQ((i / 2).dtype(), DType::F32);
  expect_values(i / 2, {3.5, -3.5});
  expect_values(i + 1.5, {8.5, -5.5});
  EXPECT_EQ((i == i).dtype(), DType::Bool);
  EXPECT_EQ(i.sum().dtype(), DType::I64);
  EXPECT_EQ(tensor(std::vector<int8_t>{1}).sum().dtype(), DType::I64);
  EXPECT_EQ((i + tensor(std::vector<int64_t>{1, 1})).dtype(), DType::I64);
  EXPECT_EQ((tensor(std::vector<uint8_t>{1}) + tensor(std::vector<int8_t>{1})).dtype(), DType::I16);
  Tensor b = full({2}, true);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ((b + 1).dtype(), DType::I64);
  expect_values(b.sum(), {2});
  EXPECT_EQ(full({2}, 1.0, DType::F16).mean().dtype(), DType::F16);
  EXPECT_EQ(i.exp().dtype(), DType::F32);
}

TEST(OpsInt, BitwiseValues) {
  Tensor a = tensor(std::vector<int32_t>{12, -1, 5}), b = tensor(std::vector<int32_t>{10, 3, -6});
  expect_values(a & b, {8, 3, 0});
  expect_values(a | b, {14, -1, -1});
  expect_values(a ^ b, {6, -4, -1});
  expect_values(~a, {-13, 0, -6});
  Tensor t = tensor({1.0f, 0.0f}).to(DType::Bool), f = tensor({0.0f, 0.0f}).to(DType::Bool);
  expect_values(~t, {0, 1});
  expect_values(t.logical_not(), {0, 1});
  expect_values(t ^ f, {1, 0});
  expect_values(tensor(std::vector<uint8_t>{0, 255}).logical_not(), {1, 0});
  expect_values(~tensor(std::vector<uint8_t>{0, 200}), {255, 55});
}

TEST(OpsLarge, SumOfAMillion) {
  const int64_t n = (int64_t{1} << 20) + 3;
  Tensor x = random_tensor({n}, DType::F32, -1, 2, 42);
  std::vector<float> h = x.to_vector<float>();
  double want = 0;
  for (float v : h) want += v;
  Tensor s = x.sum();
  double got = s.item<float>();
  EXPECT_NEAR(got, want, 1e-4 * std::fabs(want));
  Tensor m = x.reshape({-1}).mean();
  EXPECT_NEAR(m.item<float>(), want / static_cast<double>(n),
              1e-4 * std::fabs(want / static_cast<double>(n)));
  double mx = *std::max_element(h.begin(), h.end());
  EXPECT_EQ(x.max().item<float>(), static_cast<float>(mx));
}

// --- creation ---
TEST(OpsCreation, ConstantsAndRanges) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::F32);
  expect_values(z, std::vector<double>(6, 0));
  expect_values(ones({3}, {.dtype = DType::I32}), {1, 1, 1});
  EXPECT_EQ(ones({3}, {.dtype = DType::I32}).dtype(), DType::I32);
  expect_values(ones({}), {1});
  EXPECT_EQ(ones({}).shape(), Shape{});
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  expect_values(zeros({0, 3}), {});
  expect_values(full({2, 2}, 2.5), {2.5, 2.5, 2.5, 2.5});
  EXPECT_EQ(full({2}, 7).dtype(), DType::I64);
  EXPECT_EQ(full({2}, 2.5).dtype(), DType::F32);
  EXPECT_EQ(full({2}, false).dtype(), DType::Bool);
  expect_values(full({2}, 7, DType::U8), {7, 7});
  expect_values(full({2}, -1.5, DType::F16), {-1.5, -1.5});
  expect_values(full({}, 3.25, DType::F64), {3.25});

  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::I64);
  expect_values(a, {0, 1, 2, 3, 4});
  expect_values(arange(0), {});
  expect_values(arange(4, {.dtype = DType::F32}), {0, 1, 2, 3});
  Tensor b = arange(1, 10, 3);
  EXPECT_EQ(b.dtype(), DType::I64);
  expect_values(b, {1, 4, 7});
  Tensor c = arange(0, 1, 0.25);
  EXPECT_EQ(c.dtype(), DType::F32);
  expect_values(c, {0, 0.25, 0.5, 0.75});
  expect_values(arange(5, 0, -2), {5, 3, 1});
  expect_values(arange(-1.5, 1.0, 0.5, DType::F64), {-1.5, -1, -0.5, 0, 0.5});
  expect_values(arange(3, 3), {});
  expect_values(arange(0, 3, 1, DType::I32), {0, 1, 2});
  EXPECT_EQ(arange(0, 3, 1, DType::I32).dtype(), DType::I32);

  expect_values(eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor e = eye(2, 3);
  EXPECT_EQ(e.shape(), (Shape{2, 3}));
  expect_values(e, {1, 0, 0, 0, 1, 0});
  expect_values(eye(3, 2, {.dtype = DType::I32}), {1, 0, 0, 1, 0, 0});
  EXPECT_EQ(eye(3, 2, {.dtype = DType::I32}).dtype(), DType::I32);
  expect_values(eye(1), {1});
  EXPECT_EQ(eye(0).numel(), 0);

  Tensor x = random_tensor({2, 3}, DType::I32, -5, 5, 1);
  Tensor zl = zeros_like(x), ol = ones_like(x), fl = full_like(x, 4);
  EXPECT_EQ(zl.dtype(), DType::I32);
  EXPECT_EQ(zl.shape(), (Shape{2, 3}));
  expect_values(zl, std::vector<double>(6, 0));
  expect_values(ol, std::vector<double>(6, 1));
  expect_values(fl, std::vector<double>(6, 4));
  Tensor hf = full_like(random_tensor({3}, DType::BF16, 0, 1, 2), 0.5);
  EXPECT_EQ(hf.dtype(), DType::BF16);
  expect_values(hf, {0.5, 0.5, 0.5});
  // creation ops combined with compute, in one batch
  Tensor s1 = arange(12).reshape({3, 4}).sum(1), s2 = (eye(4) * 3).sum();
  realize({s1, s2});
  expect_values(s1, {6, 22, 38});
  expect_values(s2, {12});
}

TEST(OpsCreation, Rand) {
  const int64_t n = 10000;
  manual_seed(1234);
  Tensor u = rand({n});
  Tensor g = randn({100, 100});
  EXPECT_EQ(u.dtype(), DType::F32);
  EXPECT_EQ(g.shape(), (Shape{100, 100}));
  realize({u, g});
  auto uv = u.to_vector<double>(), gv = g.to_vector<double>();
  double su = 0, su2 = 0, sg = 0, sg2 = 0;
  for (double v : uv) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    su += v, su2 += v * v;
  }
  for (double v : gv) {
    EXPECT_TRUE(std::isfinite(v));
    sg += v, sg2 += v * v;
  }
  double mu = su / n, vu = su2 / n - mu * mu, mg = sg / n, vg = sg2 / n - mg * mg;
  EXPECT_NEAR(mu, 0.5, 0.02);
  EXPECT_NEAR(std::sqrt(vu), std::sqrt(1.0 / 12), 0.02);
  EXPECT_NEAR(mg, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(vg), 1.0, 0.05);
  // quantiles of the uniform draw
  int below_quarter = 0;
  for (double v : uv) below_quarter += v < 0.25;
  EXPECT_NEAR(below_quarter / double(n), 0.25, 0.02);

  // same seed: same values (including after other draws); different seed or next draw: different
  manual_seed(1234);
  EXPECT_EQ(rand({n}).to_vector<double>(), uv);
  EXPECT_EQ(randn({100, 100}).to_vector<double>(), gv);
  Tensor next = rand({n});
  EXPECT_NE(next.to_vector<double>(), uv);
  manual_seed(99);
  auto other = rand({n}).to_vector<double>();
  EXPECT_NE(other, uv);
  int equal = 0;
  for (int64_t k = 0; k < n; k++) equal += other[k] == uv[k];
  EXPECT_LT(equal, 10);
  // values within one draw differ
  EXPECT_NE(uv[0], uv[1]);

  // dtypes and degenerate shapes
  Tensor r0 = rand({}), re = rand({0, 3}), r64 = randn({4}, {.dtype = DType::F64});
  Tensor r16 = rand({64}, {.dtype = DType::F16}), rb = randn({8}, {.dtype = DType::BF16});
  EXPECT_EQ(r0.shape(), Shape{});
  EXPECT_EQ(re.shape(), (Shape{0, 3}));
  EXPECT_EQ(r64.dtype(), DType::F64);
  EXPECT_EQ(r16.dtype(), DType::F16);
  EXPECT_EQ(rb.dtype(), DType::BF16);
  realize({r0, re, r64, r16, rb});
  double v0 = r0.item<double>();
  EXPECT_GE(v0, 0.0);
  EXPECT_LT(v0, 1.0);
  EXPECT_TRUE(re.to_vector<double>().empty());
  for (double v : r16.to_vector<double>()) {
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
  }
  Tensor rl = rand_like(random_tensor({3, 2}, DType::F64, 0, 1, 5));
  EXPECT_EQ(rl.dtype(), DType::F64);
  EXPECT_EQ(rl.shape(), (Shape{3, 2}));
  Tensor nl = randn_like(rl);
  EXPECT_EQ(nl.shape(), (Shape{3, 2}));
  EXPECT_THROW(rand({2}, {.dtype = DType::I32}), Error);
  // rand feeds computation like any tensor
  manual_seed(7);
  Tensor a = rand({1000});
  auto av = a.to_vector<double>();
  manual_seed(7);
  Tensor b = (rand({1000}) * 2 - 1).sum();
  double want = 0;
  for (double v : av) want += static_cast<float>(v * 2 - 1);
  EXPECT_NEAR(b.item<float>(), want, 1e-3);
}

}  // namespace
}  // namespace kiln
