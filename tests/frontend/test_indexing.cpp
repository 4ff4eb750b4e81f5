// Index-tensor ops, triangles and ordering (src/frontend/indexing.cpp) against the reference
// interpreter and PyTorch's definitions as host loops: out-of-range indices read 0 / write nothing,
// duplicates in scatter take the last writer along the dim, sorting is stable with NaN largest.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>

#include "frontend/op_check.h"

namespace kiln {
namespace {

using namespace opcheck;
using V = std::vector<double>;
using I = std::vector<int64_t>;

int64_t nd(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

// out[o] = x[o with dim d replaced by index[o]] (0 when out of range); x read with broadcasting
// in the other dims (gather and take_along_dim).
V h_gather(const Host& x, const Host& idx, int64_t d, const Shape& out_shape) {
  V out;
  size_t r = out_shape.size();
  if (r == 0) return {idx.v[0] == 0 ? x.v[0] : 0};  // 0-D: one element along "dim 0"
  for (int64_t f = 0; f < numel_of(out_shape); f++) {
    I o = unflat(f, out_shape), io = o, xo = o;
    for (size_t k = 0; k < r; k++) {
      if (idx.shape[k] == 1) io[k] = 0;
      if (x.shape[k] == 1 && int64_t(k) != d) xo[k] = 0;
    }
    int64_t j = int64_t(idx.v[flat(io, idx.shape)]);
    if (j < 0 || j >= x.shape[d]) {
      out.push_back(0);
      continue;
    }
    xo[d] = j;
    out.push_back(x.v[flat(xo, x.shape)]);
  }
  return out;
}

V h_scatter(const Host& self, const Host& idx, const Host& src, int64_t d, bool add) {
  V out = self.v;
  if (self.shape.empty()) {
    if (idx.v[0] == 0) out[0] = add ? out[0] + src.v[0] : src.v[0];
    return out;
  }
  for (int64_t f = 0; f < numel_of(idx.shape); f++) {
    I o = unflat(f, idx.shape), t = o;
    int64_t j = int64_t(idx.v[f]);
    if (j < 0 || j >= self.shape[d]) continue;
    t[d] = j;
    double s = src.v[flat(o, src.shape)];
    double& dst = out[flat(t, self.shape)];
    dst = add ? dst + s : s;  // row-major order: the last writer along d wins
  }
  return out;
}

// Stable sort order along a line; NaN is the largest value.
I h_order(const V& v, bool desc) {
  I p(v.size());
  for (size_t k = 0; k < p.size(); k++) p[k] = int64_t(k);
  auto key_less = [](double a, double b) { return std::isnan(a) ? false : std::isnan(b) ? true : a < b; };
  std::stable_sort(p.begin(), p.end(),
                   [&](int64_t a, int64_t b) { return desc ? key_less(v[b], v[a]) : key_less(v[a], v[b]); });
  return p;
}

// values (which=0) or indices (which=1) of the first k along d
Want h_topk(int64_t d, int64_t k, bool desc, int which) {
  return [=](const std::vector<Host>& h) {
    Shape s = h[0].shape;
    if (s.empty()) return V{which ? 0.0 : h[0].v[0]};
    int64_t dd = nd(d, s.size());
    Shape os = s;
    os[dd] = k;
    V out(size_t(numel_of(os)));
    auto in_lines = lines(s, dd), out_lines = lines(os, dd);
    for (size_t l = 0; l < in_lines.size(); l++) {
      V v;
      for (auto f : in_lines[l]) v.push_back(h[0].v[f]);
      I p = h_order(v, desc);
      for (int64_t q = 0; q < k; q++) out[out_lines[l][q]] = which ? double(p[q]) : v[p[q]];
    }
    return out;
  };
}

const std::vector<DType> kTypes = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::F16};

struct GCase {
  Shape x, index;
  int64_t d;
};

TEST(Indexing, GatherTakeAlongDim) {
  std::vector<GCase> cases = {{{3, 5}, {3, 4}, 1},        {{3, 5}, {2, 5}, 0},      {{2, 3, 4}, {3, 2, 4}, 0},
                              {{2, 3, 4}, {2, 3, 6}, -1}, {{7}, {10}, 0},           {{}, {}, 0},
                              {{3, 5}, {3, 0}, 1},        {{3, 5}, {1, 1}, 1},      {{0, 4}, {0, 2}, 1},
                              {{1, 5}, {1, 7}, -1},       {{2, 3, 4}, {1, 2, 3}, 1}};
  Batch b;
  int k = 0;
  for (DType t : kTypes)
    for (auto& c : cases) {
      k++;
      int64_t d = nd(c.d, c.x.size()), n = c.x.empty() ? 1 : c.x[d];
      Tensor x = input(c.x, t, -5, 5, 10 + k, k % 4);
      for (DType it : {DType::I64, DType::I32}) {
        Tensor idx = input(c.index, it, -1, double(n), 20 + k, (k / 2) % 2);  // -1 and n: out of range
        std::string l = std::string("gather ") + dname(t) + " idx " + dname(it) + " x=" + shape_str(c.x) +
                        " index=" + shape_str(c.index) + " d=" + std::to_string(c.d);
        b.add(l, x.gather(c.d, idx), {x, idx},
              [d, s = c.index](const std::vector<Host>& h) { return h_gather(h[0], h[1], d, s); });
      }
    }
  // take_along_dim broadcasts the other dims
  for (auto [xs, is, d] :
       std::vector<GCase>{{{3, 1, 4}, {1, 5, 2}, 2}, {{3, 4}, {1, 6}, 1}, {{2, 3}, {2, 3}, 0}}) {
    Tensor x = input(xs, DType::F32, -5, 5, 30, 1), idx = input(is, DType::I64, 0, double(xs[d] - 1), 31);
    Shape a = xs, bb = is;
    a[d] = bb[d] = 1;
    Shape os = broadcast_shapes(a, bb);
    os[d] = is[d];
    b.add("take_along_dim x=" + shape_str(xs) + " index=" + shape_str(is), x.take_along_dim(idx, d), {x, idx},
          [d, os](const std::vector<Host>& h) { return h_gather(h[0], h[1], d, os); });
  }
  b.run();
  // out-of-range indices read 0 (PyTorch raises; kiln never reads out of bounds)
  testing::expect_values(tensor({1.0f, 2.0f, 3.0f}).gather(0, tensor(std::vector<int64_t>{2, -1, 3, 0})),
                         {3, 0, 0, 1});
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).gather(0, tensor(std::vector<int64_t>{1})).dtype(),
            DType::I32);
}

struct SCase {
  Shape self, index, src;
  int64_t d;
};

TEST(Indexing, ScatterScatterAdd) {
  std::vector<SCase> cases = {{{3, 5}, {3, 4}, {3, 6}, 1},
                              {{3, 5}, {2, 5}, {2, 5}, 0},
                              {{2, 3, 4}, {2, 2, 4}, {2, 3, 4}, 0},
                              {{2, 3, 4}, {2, 3, 6}, {2, 3, 6}, -1},
                              {{7}, {10}, {12}, 0},
                              {{}, {}, {}, 0},
                              {{3, 5}, {3, 0}, {3, 1}, 1},
                              {{4, 5}, {1, 1}, {2, 2}, 1}};
  Batch b;
  int k = 0;
  for (DType t : kTypes)
    for (auto& c : cases) {
      k++;
      int64_t d = nd(c.d, c.self.size()), n = c.self.empty() ? 1 : c.self[d];
      Tensor self = input(c.self, t, -5, 5, 40 + k, k % 4), src = input(c.src, t, -5, 5, 50 + k, (k + 1) % 4);
      Tensor idx = input(c.index, DType::I64, -1, double(n), 60 + k, k % 2);
      std::string l = std::string(dname(t)) + " self=" + shape_str(c.self) + " index=" + shape_str(c.index) +
                      " src=" + shape_str(c.src) + " d=" + std::to_string(c.d);
      b.add("scatter " + l, self.scatter(c.d, idx, src), {self, idx, src},
            [d](const std::vector<Host>& h) { return h_scatter(h[0], h[1], h[2], d, false); });
      if (t != DType::Bool)
        b.add(
            "scatter_add " + l, self.scatter_add(c.d, idx, src), {self, idx, src},
            [d](const std::vector<Host>& h) { return h_scatter(h[0], h[1], h[2], d, true); }, -1,
            t == DType::F16 ? 0.05 : -1);
    }
  // index_select / index_add: one index per slice along d
  for (auto [s, d] :
       std::vector<std::pair<Shape, int64_t>>{{{3, 5}, 1}, {{3, 5}, 0}, {{2, 3, 4}, -2}, {{7}, 0}}) {
    for (DType t : {DType::F32, DType::I32, DType::F64}) {
      k++;
      int64_t dd = nd(d, s.size()), n = s[dd];
      Tensor x = input(s, t, -5, 5, 70 + k, k % 4), idx = input({6}, DType::I64, 0, double(n - 1), 80 + k);
      Shape os = s;
      os[dd] = 6;
      Tensor src = input(os, t, -5, 5, 90 + k, 1);
      std::string l = std::string(dname(t)) + " " + shape_str(s) + " d=" + std::to_string(d);
      b.add("index_select " + l, x.index_select(d, idx), {x, idx}, [dd, os](const std::vector<Host>& h) {
        Host full_idx{os, {}};  // index broadcast along the other dims
        for (int64_t f = 0; f < numel_of(os); f++) full_idx.v.push_back(h[1].v[unflat(f, os)[dd]]);
        return h_gather(h[0], full_idx, dd, os);
      });
      double alpha = is_float(t) ? 0.5 : 2;
      b.add("index_add " + l, x.index_add(d, idx, src, alpha), {x, idx, src},
            [dd, os, alpha](const std::vector<Host>& h) {
              Host full_idx{os, {}}, scaled = h[2];
              for (int64_t f = 0; f < numel_of(os); f++) full_idx.v.push_back(h[1].v[unflat(f, os)[dd]]);
              for (auto& v : scaled.v) v *= alpha;
              return h_scatter(h[0], full_idx, scaled, dd, true);
            });
    }
  }
  b.run();
  // duplicates: the last writer along d; out-of-range indices write nothing
  Tensor self = zeros({5});
  testing::expect_values(
      self.scatter(0, tensor(std::vector<int64_t>{1, 3, 1, 7, -1}), tensor({1, 2, 3, 4, 5})),
      {0, 3, 0, 2, 0});
  testing::expect_values(self.scatter_add(0, tensor(std::vector<int64_t>{1, 3, 1, 7}), tensor({1, 2, 3, 4})),
                         {0, 4, 0, 2, 0});
  testing::expect_values(zeros({3, 2}).index_add(0, tensor(std::vector<int64_t>{2, 2}), ones({2, 2})),
                         {0, 0, 0, 0, 2, 2});
}

TEST(Indexing, TrilTriu) {
  Batch b;
  int k = 0;
  for (DType t : kTypes)
    for (Shape s : {Shape{3, 5}, Shape{5, 3}, Shape{2, 4, 4}, Shape{1, 1}, Shape{0, 3}})
      for (int64_t diag : {0, 1, -1, 3, -4}) {
        k++;
        Tensor x = input(s, t, -5, 5, 100 + k, k % 4);
        for (bool lower : {true, false}) {
          std::string l = std::string(lower ? "tril " : "triu ") + dname(t) + " " + shape_str(s) +
                          " diagonal=" + std::to_string(diag);
          b.add(l, lower ? x.tril(diag) : x.triu(diag), {x}, [s, diag, lower](const std::vector<Host>& h) {
            V out = h[0].v;
            for (int64_t f = 0; f < int64_t(out.size()); f++) {
              I o = unflat(f, s);
              int64_t off = o[s.size() - 1] - o[s.size() - 2];
              if (lower ? off > diag : off < diag) out[f] = 0;
            }
            return out;
          });
        }
      }
  b.run();
}

TEST(Indexing, TopkSortArgsort) {
  struct C {
    Shape s;
    int64_t d, k;
  };
  std::vector<C> cases = {{{7}, 0, 3},       {{3, 5}, 1, 2},     {{3, 5}, 0, 3},   {{3, 5}, -1, 5},
                          {{2, 3, 4}, 1, 1}, {{2, 3, 4}, -3, 2}, {{17, 33}, 1, 4}, {{}, 0, 1},
                          {{4, 1}, 1, 1},    {{3, 0}, 1, 0},     {{0, 3}, 1, 2},   {{3, 5}, 1, 0}};
  Batch b;
  int n = 0;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::F16, DType::U8})
    for (auto& c : cases) {
      n++;
      // few distinct values: many ties
      Tensor x = input(c.s, t, is_float(t) ? -3 : 0, 3, 200 + n, n % 4);
      if (is_float(t)) x = x.trunc();
      std::string l = std::string(dname(t)) + " " + shape_str(c.s) + " d=" + std::to_string(c.d);
      for (bool desc : {true, false}) {
        std::string ls = l + (desc ? " largest/descending" : " smallest/ascending");
        auto [tv, ti] = x.topk(c.k, c.d, desc);
        b.add("topk values k=" + std::to_string(c.k) + ls, tv, {x}, h_topk(c.d, c.k, desc, 0));
        b.add("topk indices k=" + std::to_string(c.k) + ls, ti, {x}, h_topk(c.d, c.k, desc, 1));
        int64_t len = c.s.empty() ? 1 : c.s[nd(c.d, c.s.size())];
        auto [sv, si] = x.sort(c.d, desc);
        b.add("sort values" + ls, sv, {x}, h_topk(c.d, len, desc, 0));
        b.add("sort indices" + ls, si, {x}, h_topk(c.d, len, desc, 1));
        b.add("argsort" + ls, x.argsort(c.d, desc), {x}, h_topk(c.d, len, desc, 1));
      }
    }
  b.run();
  // NaN sorts as the largest value; ties keep their order
  Tensor x = tensor({3.0f, NAN, 1.0f, 3.0f, -INFINITY, NAN});
  auto [v, i] = x.sort();
  testing::expect_values(v, {-kInf, 1, 3, 3, kNaN, kNaN});
  testing::expect_values(i, {4, 2, 0, 3, 1, 5});
  auto [dv, di] = x.sort(0, true);
  testing::expect_values(dv, {kNaN, kNaN, 3, 3, 1, -kInf});
  testing::expect_values(di, {1, 5, 0, 3, 2, 4});
  auto [tv, ti] = x.topk(2);
  testing::expect_values(tv, {kNaN, kNaN});
  testing::expect_values(ti, {1, 5});
  auto [sv, si] = x.topk(3, 0, false);
  testing::expect_values(sv, {-kInf, 1, 3});
  testing::expect_values(si, {4, 2, 0});
  EXPECT_EQ(x.argsort().dtype(), DType::I64);
  // -0.0 and 0.0 tie
  testing::expect_values(tensor({0.0f, -0.0f, -1.0f}).argsort(), {2, 0, 1});
}

TEST(Indexing, OneHot) {
  Batch b;
  for (DType it : {DType::I64, DType::I32})
    for (Shape s : {Shape{5}, Shape{2, 3}, Shape{}, Shape{0}}) {
      Tensor idx = input(s, it, 0, 3, 300, 1);
      b.add(std::string("one_hot ") + dname(it) + " " + shape_str(s), one_hot(idx, 4), {idx},
            [](const std::vector<Host>& h) {
              V out;
              for (double v : h[0].v)
                for (int c = 0; c < 4; c++) out.push_back(v == c);
              return out;
            });
    }
  b.run();
  Tensor o = one_hot(tensor(std::vector<int64_t>{2, 0, 5}), 3);
  EXPECT_EQ(o.dtype(), DType::I64);
  EXPECT_EQ(o.shape(), (Shape{3, 3}));
  testing::expect_values(o, {0, 0, 1, 1, 0, 0, 0, 0, 0});  // out of range: all zeros
}

TEST(Indexing, Errors) {
  Tensor x = zeros({3, 5});
  Tensor i64 = tensor(std::vector<int64_t>{0, 1});
  expect_error([&] { x.gather(1, i64); }, {"kiln.gather:", "same number of dims", "(3, 5)", "(2,)"});
  expect_error([&] { x.gather(1, zeros({3, 2})); }, {"kiln.gather:", "integer", "f32"});
  expect_error(
      [&] {
        x.gather(0, zeros({3, 6}, {.dtype = DType::I64}));
      },
      {"kiln.gather:", "larger", "dim 1"});
  expect_error(
      [&] {
        x.gather(2, zeros({3, 5}, {.dtype = DType::I64}));
      },
      {"kiln.gather:", "dim 2 out of range"});
  expect_error(
      [&] {
        x.scatter(0, zeros({4, 5}, {.dtype = DType::I64}), zeros({3, 5}));
      },
      {"kiln.scatter:", "larger", "(4, 5)"});
  expect_error([&] { x.scatter_add(0, i64, zeros({3, 5})); }, {"kiln.scatter_add:", "same number of dims"});
  expect_error(
      [&] {
        x.index_select(0, zeros({2, 2}, {.dtype = DType::I64}));
      },
      {"kiln.index_select:", "1-D"});
  expect_error([&] { x.index_select(0, tensor({1.0f})); }, {"kiln.index_select:", "integer", "f32"});
  expect_error([&] { x.index_add(0, i64, zeros({3, 5})); }, {"kiln.index_add:", "does not fit", "(3, 5)"});
  expect_error([&] { zeros({3}, {.dtype = DType::I32}).index_add(0, i64, zeros({2}), 0.5); },
               {"kiln.index_add:", "alpha", "i32"});
  expect_error([&] { x.take_along_dim(zeros({3}, {.dtype = DType::I64}), 0); },
               {"kiln.take_along_dim:", "same number of dims"});
  expect_error(
      [&] {
        x.take_along_dim(zeros({2, 4}, {.dtype = DType::I64}), 0);
      },
      {"kiln.take_along_dim:", "cannot be broadcast"});
  expect_error([&] { zeros({3}).tril(); }, {"kiln.tril:", "at least 2 dims", "(3,)"});
  expect_error([&] { zeros({3}).triu(); }, {"kiln.triu:", "at least 2 dims"});
  expect_error([&] { x.topk(6, 1); }, {"kiln.topk:", "k = 6", "size 5"});
  expect_error([&] { x.topk(-1); }, {"kiln.topk:", "k = -1"});
  expect_error([&] { x.sort(2); }, {"kiln.sort:", "dim 2 out of range"});
  expect_error([&] { one_hot(tensor({1.0f}), 3); }, {"kiln.one_hot:", "integer"});
  expect_error([&] { one_hot(i64, -1); }, {"kiln.one_hot:", "num_classes"});
}

}  // namespace
}  // namespace kiln
