// Numerical behaviour users rely on: stable activations at large |x|, PyTorch's subgradient
// conventions at ties and kinks, max's gradient where its input is recomputed, long sums.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::expect_values;

namespace {

// d/dx sum(f(x)) at each of xs, by autograd.
std::vector<float> grad_at(const std::function<Tensor(const Tensor&)>& f, const std::vector<float>& xs) {
  Tensor x = tensor(xs, {static_cast<int64_t>(xs.size())});
  x.requires_grad_();
  f(x).sum().backward();
  return x.grad().to_vector<float>();
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double sigmoid_grad(double x) {  // e/(1+e)^2 with e = exp(-|x|): no cancellation
  double e = std::exp(-std::abs(x));
  return e / ((1 + e) * (1 + e));
}

const std::vector<float> kLarge = {-1000.f, -104.f, -100.f, -89.f, -88.8f, -30.f, -1.f,  0.f,
                                   1.f,     30.f,   88.8f,  89.f,  100.f,  104.f, 1000.f};

}  // namespace

// 1/(exp(-x)+1) overflowed to 0 * inf in its gradient below x = -88.7
TEST(Numerics, SigmoidAndSiluGradientsAreFiniteAtLargeInputs) {
  auto gs = grad_at([](const Tensor& x) { return x.sigmoid(); }, kLarge);
  auto gu = grad_at([](const Tensor& x) { return x.silu(); }, kLarge);
  for (size_t i = 0; i < kLarge.size(); i++) {
    double x = kLarge[i], s = sigmoid(x), ds = sigmoid_grad(x);
    EXPECT_NEAR(gs[i], ds, 1e-6 * ds + 1e-38) << "sigmoid' at " << x;
    double du = s + x * ds;
    EXPECT_NEAR(gu[i], du, 1e-5 * std::abs(du) + 1e-36) << "silu' at " << x;
  }
  EXPECT_TRUE(expect_values(tensor({-1000.f, 0.f, 1000.f}, {3}).sigmoid(), {0, 0.5, 1}));
}

TEST(Numerics, StableActivationsHaveFiniteGradientsAtLargeInputs) {
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fs = {
      {"softplus", [](const Tensor& x) { return x.softplus(); }},
      {"logsigmoid", [](const Tensor& x) { return x.logsigmoid(); }},
      {"tanh", [](const Tensor& x) { return x.tanh(); }},
      {"gelu", [](const Tensor& x) { return x.gelu(); }},
      {"gelu tanh", [](const Tensor& x) { return x.gelu(true); }},
      {"mish", [](const Tensor& x) { return x.mish(); }},
      {"elu", [](const Tensor& x) { return x.elu(); }},
      {"log_softmax",
       [](const Tensor& x) {
         return x.reshape({3, 5}).log_softmax(1) * x.reshape({3, 5});
       }},
      {"bce with logits",
       [](const Tensor& x) { return F::binary_cross_entropy_with_logits(x, (x > 0).to(DType::F32)); }},
  };
  for (auto& [name, f] : fs) {
    auto g = grad_at(f, kLarge);
    for (size_t i = 0; i < g.size(); i++) EXPECT_TRUE(std::isfinite(g[i])) << name << "' at " << kLarge[i];
  }
  // d/dx log(sigmoid(x)) = 1 - sigmoid(x); softplus' = sigmoid
  auto gl = grad_at([](const Tensor& x) { return x.logsigmoid(); }, kLarge);
  auto gp = grad_at([](const Tensor& x) { return x.softplus(); }, kLarge);
  for (size_t i = 0; i < kLarge.size(); i++) {
    double s = sigmoid(kLarge[i]);
    EXPECT_NEAR(gl[i], 1 - s, 1e-6) << kLarge[i];
    EXPECT_NEAR(gp[i], s, 1e-6) << kLarge[i];
  }
}

// PyTorch's conventions at kinks and ties (docs/architecture.md lists them)
TEST(Numerics, SubgradientsFollowPyTorch) {
  std::vector<float> at{-1.f, 0.f, 1.f};
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.relu(); }, at), (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.abs(); }, at), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.leaky_relu(0.1); }, at),
            (std::vector<float>{0.1f, 0.1f, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.relu6(); }, {-1.f, 0.f, 3.f, 6.f, 7.f}),
            (std::vector<float>{0, 1, 1, 1, 0}));
  // clamp: x at a bound passes its gradient whole
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.clamp(0, 1); }, {-1.f, 0.f, 0.5f, 1.f, 2.f}),
            (std::vector<float>{0, 1, 1, 1, 0}));
  {
    Tensor x = tensor({-1.f, 0.f, 0.5f, 1.f, 2.f}, {5}), lo = zeros({5}), hi = ones({5});
    x.requires_grad_(), lo.requires_grad_(), hi.requires_grad_();
    x.clamp(lo, hi).sum().backward();
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 1, 1, 1, 0}));
    EXPECT_EQ(lo.grad().to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 0}));
    EXPECT_EQ(hi.grad().to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 1}));
  }
  // maximum of equal values, and max over ties (amax): shared evenly
  {
    Tensor a = tensor({1.f, 2.f}, {2}), b = tensor({1.f, 3.f}, {2});
    a.requires_grad_(), b.requires_grad_();
    maximum(a, b).sum().backward();
    EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0.5f, 0}));
    EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{0.5f, 1}));
  }
  EXPECT_EQ(grad_at([](const Tensor& x) { return x.max(); }, {2.f, 1.f, 2.f}),
            (std::vector<float>{0.5f, 0, 0.5f}));
  // NaN stays NaN through relu and clamp
  Tensor n = tensor({NAN, -1.f}, {2});
  EXPECT_TRUE(std::isnan(n.relu().to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(n.clamp(0, 1).to_vector<float>()[0]));
}

// max's gradient compares x with its max; x is recomputed in the backward's kernel, and the two
// must round alike (no contraction into an FMA in one kernel and not the other)
TEST(Numerics, MaxGradientWhereItsInputIsRecomputed) {
  for (uint64_t seed = 0; seed < 8; seed++) {
    manual_seed(seed);
    Tensor a = tensor({0.480163544f, -0.268265963f, -1.59810507f}, {3, 1});
    a.requires_grad_();
    Tensor b = tensor({-1.20104957f}, {1});
    Tensor c = randn({5, 2});
    Tensor x = (b - (a.abs() + 0x1p-6).log().pad({0, 1, 2, 0}, -1.25)) * b + c;
    x.max(0).sum().backward();
    for (float g : a.grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(g)) << "seed " << seed;
    EXPECT_TRUE(expect_matches_reference(a.grad(), 1e-5, 1e-6)) << "seed " << seed;
  }
}

// f32 sums accumulate in chunks: a sequential sum of 1e8 values of 0.1 was 11203496
TEST(Numerics, LongSumsAreAccurate) {
  double want = 1e8 * static_cast<double>(0.1f);
  EXPECT_NEAR(full({100000000}, 0.1).sum().item<float>(), want, want * 1e-6);
  EXPECT_EQ(ones({int64_t{1} << 28}).mean().item<float>(), 1.0f);
  EXPECT_EQ(ones({3, 1 << 20}).sum(1).to_vector<float>(), (std::vector<float>{1 << 20, 1 << 20, 1 << 20}));
  // a long prime-length row (chunks plus a remainder), a sum over two long axes, a matmul with a long
  // inner dimension (chunks with register lanes)
  Tensor r = kiln::testing::random_tensor({2, 1000003}, DType::F32, 0, 1, 3);
  EXPECT_TRUE(expect_matches_reference(r.sum(1), 1e-6, 0));
  Tensor s = kiln::testing::random_tensor({3000, 3000}, DType::F32, 0, 1, 4);
  EXPECT_TRUE(expect_matches_reference(s.sum(), 1e-6, 0));
  EXPECT_TRUE(expect_matches_reference(s.sum({0, 1}, true), 1e-6, 0));
  Tensor p = kiln::testing::random_tensor({8, 40000}, DType::F32, 0, 1, 5);
  Tensor q = kiln::testing::random_tensor({40000, 16}, DType::F32, 0, 1, 6);
  EXPECT_TRUE(expect_matches_reference(p.matmul(q), 4e-6, 0));
}
