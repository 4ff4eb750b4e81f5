// Random tensors (src/frontend/random.cpp): determinism per seed and generator, distribution sanity,
// permutations, multinomial frequencies, bernoulli rates and argument errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln {
namespace {

using testing::error_of;

std::pair<double, double> mean_var(const std::vector<double>& v) {
  double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, s / static_cast<double>(v.size())};
}

TEST(Random, DeterminismPerSeedAndGenerator) {
  Generator a(7), b(7), c(8);
  auto ra = rand({100}, a).to_vector<double>(), rb = rand({100}, b).to_vector<double>();
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rand({100}, c).to_vector<double>());
  EXPECT_NE(ra, rand({100}, a).to_vector<double>());  // the offset moved on
  a.manual_seed(7);
  EXPECT_EQ(ra, rand({100}, a).to_vector<double>());
  // the default generator: manual_seed resets it, and the no-generator overloads use it
  manual_seed(3);
  auto d1 = randn({50}).to_vector<double>();
  auto i1 = randint(0, 10, {50}).to_vector<double>();
  manual_seed(3);
  EXPECT_EQ(d1, randn({50}).to_vector<double>());
  EXPECT_EQ(i1, randint(0, 10, {50}).to_vector<double>());
  Generator g(3);
  EXPECT_EQ(d1, randn({50}, g).to_vector<double>());
  // take() hands out offsets
  Generator t(1);
  EXPECT_EQ(t.take(5), (std::pair<uint64_t, uint64_t>{1, 0}));
  EXPECT_EQ(t.take(3), (std::pair<uint64_t, uint64_t>{1, 5}));
  EXPECT_EQ(&default_generator(), &default_generator());
}

TEST(Random, Distributions) {
  const int64_t n = 10000;
  Generator g(11);
  auto [um, uv] = mean_var(rand({n}, g).to_vector<double>());
  EXPECT_NEAR(um, 0.5, 0.01);
  EXPECT_NEAR(uv, 1.0 / 12, 0.005);
  auto [nm, nv] = mean_var(randn({n}, g).to_vector<double>());
  EXPECT_NEAR(nm, 0, 0.03);
  EXPECT_NEAR(nv, 1, 0.05);
  manual_seed(5);
  auto nrm = normal(3, 2, {n}).to_vector<double>();
  auto [mm, mv] = mean_var(nrm);
  EXPECT_NEAR(mm, 3, 0.06);
  EXPECT_NEAR(mv, 4, 0.2);
  auto uni = uniform(-2, 6, {n}, {.dtype = DType::F64}).to_vector<double>();
  auto [qm, qv] = mean_var(uni);
  EXPECT_NEAR(qm, 2, 0.1);
  EXPECT_NEAR(qv, 64.0 / 12, 0.25);
  EXPECT_GE(*std::min_element(uni.begin(), uni.end()), -2);
  EXPECT_LT(*std::max_element(uni.begin(), uni.end()), 6);
  // randint covers [low, high) evenly, including a range wider than 2^24
  Tensor ri = randint(-3, 4, {n}, g);
  EXPECT_EQ(ri.dtype(), DType::I64);
  auto rv = ri.to_vector<double>();
  std::vector<int> count(7);
  for (double v : rv) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    count[static_cast<size_t>(v + 3)]++;
  }
  for (int c : count) EXPECT_NEAR(c, n / 7.0, 200);
  auto wide = randint(0, int64_t{1} << 40, {n}, g).to_vector<double>();
  auto [wm, wv] = mean_var(wide);
  EXPECT_NEAR(wm / std::ldexp(1.0, 40), 0.5, 0.02);
  EXPECT_EQ(randint(0, 5, {3}, g, {.dtype = DType::I32}).dtype(), DType::I32);
  // bernoulli: rate and dtype
  Tensor p = full({n}, 0.3);
  auto bv = bernoulli(p, g).to_vector<double>();
  double ones = std::count(bv.begin(), bv.end(), 1.0), zeros = std::count(bv.begin(), bv.end(), 0.0);
  EXPECT_EQ(ones + zeros, n);
  EXPECT_NEAR(ones / n, 0.3, 0.015);
  Tensor pe = tensor({0.0f, 1.0f, 0.0f, 1.0f});
  testing::expect_values(bernoulli(pe, g), {0, 1, 0, 1});
  EXPECT_EQ(bernoulli(p.to(DType::F64)).dtype(), DType::F64);
  // shapes: scalars, empty, half types
  EXPECT_EQ(rand({0, 3}, g).numel(), 0);
  EXPECT_EQ(randn({}, g, {.dtype = DType::BF16}).dtype(), DType::BF16);
  EXPECT_EQ(randint(0, 2, {2, 0}, g).shape(), (Shape{2, 0}));
}

TEST(Random, RandpermIsAPermutation) {
  Generator g(2);
  for (int64_t n : {0, 1, 2, 10, 1000, 3000}) {
    auto v = randperm(n, g).to_vector<double>();
    ASSERT_EQ(v.size(), static_cast<size_t>(n));
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << "n=" << n;
    if (n >= 10) {
      int fixed = 0;
      for (int64_t i = 0; i < n; i++) fixed += v[static_cast<size_t>(i)] == i;
      EXPECT_LT(fixed, 5) << "n=" << n;  // about 1 fixed point expected
    }
  }
  // the front of a long permutation is an unbiased sample of 0..n-1
  auto big = randperm(3000, g).to_vector<double>();
  auto [m, v] = mean_var(std::vector<double>(big.begin(), big.begin() + 1000));
  EXPECT_NEAR(m, 1499.5, 60);
  EXPECT_NEAR(v, 3000.0 * 3000.0 / 12, 60000);
  Generator a(9), b(9);
  EXPECT_EQ(randperm(50, a).to_vector<double>(), randperm(50, b).to_vector<double>());
  EXPECT_EQ(randperm(4, {.dtype = DType::I32}).dtype(), DType::I32);
}

TEST(Random, Multinomial) {
  Generator g(4);
  Tensor probs = tensor({1.0f, 0.0f, 3.0f, 6.0f});  // unnormalized
  const int64_t n = 10000;
  auto s = multinomial(probs, n, true, g).to_vector<double>();
  std::vector<int> count(4);
  for (double v : s) count[static_cast<size_t>(v)]++;
  EXPECT_EQ(count[1], 0);
  EXPECT_NEAR(count[0] / double(n), 0.1, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.3, 0.02);
  EXPECT_NEAR(count[3] / double(n), 0.6, 0.02);
  // 2-D, without replacement: distinct categories per row, zero-probability ones never drawn
  Tensor p2 = tensor({0.5f, 0.5f, 0.0f, 1.0f, 2.0f, 1.0f, 1.0f, 1.0f, 3.0f, 0.0f, 0.0f, 1.0f}, {3, 4});
  Tensor d = multinomial(p2, 2, false, g);
  EXPECT_EQ(d.shape(), (Shape{3, 2}));
  EXPECT_EQ(d.dtype(), DType::I64);
  auto dv = d.to_vector<double>();
  for (int r = 0; r < 3; r++) EXPECT_NE(dv[r * 2], dv[r * 2 + 1]);
  EXPECT_TRUE(dv[0] != 2 && dv[1] != 2);
  EXPECT_EQ(std::min(dv[4], dv[5]), 0);  // row 2 has only categories 0 and 3
  EXPECT_EQ(std::max(dv[4], dv[5]), 3);
  // first draw without replacement follows the probabilities
  std::vector<int> first(4);
  Tensor pf = tensor({1.0f, 2.0f, 3.0f, 4.0f});
  {
    auto v = multinomial(pf.unsqueeze(0).expand({2000, 4}), 4, false, g).to_vector<double>();
    for (int i = 0; i < 2000; i++) first[static_cast<size_t>(v[static_cast<size_t>(i) * 4])]++;
    for (int i = 0; i < 2000; i++) {  // full draws are permutations
      std::vector<double> row(v.begin() + i * 4, v.begin() + i * 4 + 4);
      std::sort(row.begin(), row.end());
      ASSERT_EQ(row, (std::vector<double>{0, 1, 2, 3}));
    }
  }
  for (int k = 0; k < 4; k++) EXPECT_NEAR(first[static_cast<size_t>(k)] / 2000.0, (k + 1) / 10.0, 0.03);
  Generator a(1), b(1);
  EXPECT_EQ(multinomial(pf, 3, false, a).to_vector<double>(),
            multinomial(pf, 3, false, b).to_vector<double>());
  // one draw (the smallest key, found in O(k)) is the first of a full draw (the keys ranked) with
  // the same generator state, zero-probability categories never drawn
  Tensor pz = tensor({0.0f, 1.0f, 0.0f, 3.0f, 2.0f, 0.0f}).unsqueeze(0).expand({500, 6});
  Generator c(5), c2(5);
  Tensor one = multinomial(pz, 1, false, c), all = multinomial(pz, 3, false, c2);
  EXPECT_EQ(one.shape(), (Shape{500, 1}));
  EXPECT_EQ(one.to_vector<int64_t>(), all.slice(1, 0, 1).to_vector<int64_t>());
  for (int64_t v : one.to_vector<int64_t>()) EXPECT_TRUE(v == 1 || v == 3 || v == 4) << v;
}

TEST(Random, Dropout) {
  manual_seed(1);
  Tensor x = ones({10000});
  auto v = F::dropout(x, 0.25).to_vector<double>();
  int kept = 0;
  for (double e : v) {
    ASSERT_TRUE(e == 0 || std::fabs(e - 1 / 0.75) < 1e-6);
    kept += e != 0;
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.015);
  manual_seed(1);
  EXPECT_EQ(F::dropout(x, 0.25).to_vector<double>(), v);  // seeded by the default generator
  EXPECT_EQ(F::dropout(x, 0.25, false).node(), x.node());
  EXPECT_EQ(F::dropout(x, 0.0).node(), x.node());
  testing::expect_values(F::dropout(tensor({1.0f, 2.0f}), 1.0), {0, 0});
  EXPECT_EQ(F::dropout(testing::random_tensor({8}, DType::F16, 0, 1, 1), 0.5).dtype(), DType::F16);
}

TEST(Random, Errors) {
  Generator g;
  EXPECT_NE(error_of([&] { randint(5, 5, {2}, g); }).find("kiln.randint: needs low < high, got low=5 high=5"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { rand({2}, g, {.dtype = DType::I32}); }).find("kiln.rand: needs a float dtype, got i32"),
      std::string::npos);
  EXPECT_NE(error_of([&] { randperm(-1, g); }).find("kiln.randperm: n must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { normal(0, -1, {2}); }).find("kiln.normal: std must be >= 0"), std::string::npos);
  EXPECT_NE(error_of([&] { uniform(2, 1, {2}); }).find("kiln.uniform: needs low <= high"), std::string::npos);
  EXPECT_NE(error_of([&] {
              bernoulli(tensor(std::vector<int32_t>{1}), g);
            }).find("kiln.bernoulli: probabilities must be a float tensor, got i32"),
            std::string::npos);
  Tensor p = tensor({1.0f, 1.0f});
  EXPECT_NE(error_of([&] {
              multinomial(p, 3, false, g);
            }).find("kiln.multinomial: cannot draw 3 samples from 2 categories without replacement"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              multinomial(p.reshape({1, 1, 2}), 1, true, g);
            }).find("kiln.multinomial: probabilities must be 1-D or 2-D, got shape (1, 1, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multinomial(p, 0, true, g); }).find("num_samples must be > 0"), std::string::npos);
  EXPECT_NE(error_of([&] { F::dropout(p, 1.5); }).find("kiln.dropout: p must be in [0, 1], got 1.500000"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              F::dropout(tensor(std::vector<int32_t>{1}), 0.5);
            }).find("kiln.dropout: input must be a float tensor"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
