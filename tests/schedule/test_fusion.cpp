// Fusion is tested by counting the kernels a realize runs.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
int64_t kernels_for(std::vector<Tensor> ts) {
  int64_t before = stats().kernels_run;
  for (auto& t : ts) expect_matches_reference(t, 1e-4, 1e-5);
  return stats().kernels_run - before;
}
Tensor r(Shape s, uint64_t seed) { return random_tensor(s, DType::F32, -2, 2, seed); }
}  // namespace

TEST(Fusion, ElementwiseChainIsOneKernel) {
  Tensor x = r({16, 32}, 1);
  EXPECT_EQ(kernels_for({(x * 2 + 1).relu().exp()}), 1);
}

TEST(Fusion, TwoReducesOfOneInputAreOneKernel) {
  Tensor x = r({16, 32}, 2);
  EXPECT_EQ(kernels_for({x.sum(1) + x.max(1)}), 1);
}

TEST(Fusion, MatmulBiasReluIsOneKernel) {
  Tensor x = r({8, 16}, 3), w = r({16, 12}, 4), b = r({12}, 5);
  EXPECT_EQ(kernels_for({(x.matmul(w) + b).relu()}), 1);
}

TEST(Fusion, BroadcastMultiplyAddTanhIsOneKernel) {
  Tensor a = r({64, 48}, 6), b = r({64, 48}, 7), c = r({1, 48}, 8);
  EXPECT_EQ(kernels_for({a * b + c.tanh()}), 1);
}

TEST(Fusion, SoftmaxIsAtMostThreeKernels) {
  Tensor x = r({8, 40}, 9);
  EXPECT_LE(kernels_for({x.softmax(1)}), 3);
  Tensor y = r({8, 40}, 10);
  EXPECT_LE(kernels_for({y.softmax(0)}), 3);
}

TEST(Fusion, SharedReduceIsComputedOnce) {
  Tensor x = r({16, 32}, 11);
  Tensor s = x.sum(1, true);
  // a row's sum broadcast back over the row: one kernel that sums each row once, before the loop
  // over the row (so the kernel does O(rows * cols) work, not O(rows * cols^2))
  EXPECT_EQ(kernels_for({x - s}), 1);
  auto sched = schedule::make_schedule(ir::rewrite_graph({(x - s).node()}));
  ASSERT_EQ(sched.kernels.size(), 1u);
  EXPECT_LT(codegen::lower(sched.kernels[0].ast).program.flops, 8.0 * 16 * 32);  // per element: 32x more
  Tensor c = x.sum(0, true);  // a column's sum is not a row: realized, as before
  EXPECT_EQ(kernels_for({x - c}), 2);
}

TEST(Fusion, LayerNormForwardIsOneKernel) {
  Tensor x = r({8, 48}, 13), w = r({48}, 14), b = r({48}, 15);
  EXPECT_EQ(kernels_for({F::layer_norm(x, {48}, w, b)}), 1);
  EXPECT_TRUE(kiln::testing::expect_matches_reference(F::layer_norm(x, {48}, w, b), 1e-5, 1e-5));
}

TEST(Fusion, ContiguousIsARealizePoint) {
  Tensor x = r({16, 32}, 12);
  EXPECT_EQ(kernels_for({(x * 2).contiguous().t() + 1}), 2);
}

TEST(Fusion, CostModelCountsBytes) {
  // recompute reads the inputs again in each consumer; storing writes once and reads per consumer
  EXPECT_FALSE(schedule::store_is_cheaper(2, 4, 4));   // one f32 input, two consumers: 8 vs 16 bytes
  EXPECT_FALSE(schedule::store_is_cheaper(2, 12, 4));  // three f32 inputs, two consumers: 24 vs 24
  EXPECT_TRUE(schedule::store_is_cheaper(3, 12, 4));   // three consumers: 36 vs 28
  EXPECT_TRUE(schedule::store_is_cheaper(2, 16, 4));   // four inputs: 32 vs 28
}

TEST(Fusion, ReducesOfOneInputRealizedTogetherShareOneKernel) {
  Tensor x = r({16, 32}, 13);
  Tensor s = x.sum(1), m = x.max(1), e = x.exp().sum(1);
  int64_t before = stats().kernels_run;
  realize({s, m, e});
  EXPECT_EQ(stats().kernels_run - before, 1);
  auto xv = x.to_vector<float>();
  auto sv = s.to_vector<float>(), mv = m.to_vector<float>();
  for (int i = 0; i < 16; i++) {
    float ss = 0, mm = -INFINITY;
    for (int j = 0; j < 32; j++) ss += xv[i * 32 + j], mm = std::max(mm, xv[i * 32 + j]);
    EXPECT_NEAR(sv[i], ss, 1e-4);
    EXPECT_EQ(mv[i], mm);
  }
}

TEST(Fusion, NormalizationAndLossKernelCounts) {
  Tensor x = r({8, 40}, 20), w = r({40}, 21), b = r({40}, 22);
  Tensor cls = tensor(std::vector<int64_t>{1, 0, 3, 39, 7, 7, 2, 5});
  EXPECT_LE(kernels_for({x.log_softmax(1)}), 3);
  EXPECT_LE(kernels_for({F::layer_norm(x, {40}, w, b)}), 3);
  EXPECT_LE(kernels_for({F::cross_entropy(x, cls)}), 3);
  // layer_norm forward and backward (dx, dw, db) together
  Tensor y = F::layer_norm(x, {40}, w, b);
  auto g = grad({y}, {x, w, b}, {r({8, 40}, 23)});
  int64_t before = stats().kernels_run;
  realize({y, g[0], g[1], g[2]});
  EXPECT_LE(stats().kernels_run - before, 6);
}

TEST(Fusion, CostlyWorkBroadcastIntoAReduceIsStored) {
  // exp(x)*3+1 feeds a matmul: fused, it would be recomputed for each of w's 48 columns
  Tensor x = r({64, 32}, 30), w = r({32, 48}, 31);
  EXPECT_EQ(kernels_for({(x.exp() * 3 + 1).matmul(w)}), 2);
  // a cheap producer stays fused (one multiply per use)
  EXPECT_EQ(kernels_for({(x * 3).matmul(w)}), 1);
  // and a small costly one too (a per-row statistic: an extra kernel would cost more)
  Tensor s = r({4, 32}, 32);
  EXPECT_EQ(kernels_for({(s.exp() * 3 + 1).matmul(w)}), 1);
}
