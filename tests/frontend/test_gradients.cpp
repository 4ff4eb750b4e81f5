// Gradient checks (float64; compiled gradient vs reference interpreter vs finite differences) for
// the composite ops: reductions, indexing, shape ops, einsum, convolution and pooling.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_gradients_match;
using kiln::testing::random_tensor;
using Ts = std::vector<Tensor>;

namespace {
Tensor r(Shape s, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(s, DType::F64, lo, hi, seed);
}
Tensor idx(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
}  // namespace

TEST(Gradients, Reductions) {
  expect_gradients_match([](const Ts& x) { return x[0].var({1}); }, {r({3, 5}, 1)}, 1);
  expect_gradients_match([](const Ts& x) { return x[0].std({0}, 0, true); }, {r({4, 3}, 2)}, 2);
  expect_gradients_match([](const Ts& x) { return x[0].logsumexp({1}); }, {r({3, 5}, 3)}, 3);
  expect_gradients_match([](const Ts& x) { return x[0].log_softmax(-1); }, {r({2, 3, 4}, 4)}, 4);
  expect_gradients_match([](const Ts& x) { return x[0].norm(2, {1}); }, {r({3, 4}, 5)}, 5);
  expect_gradients_match([](const Ts& x) { return x[0].norm(3, {}); }, {r({3, 4}, 6, 0.5, 2)}, 6);
  expect_gradients_match([](const Ts& x) { return x[0].cumsum(1); }, {r({3, 5}, 7)}, 7);
  expect_gradients_match([](const Ts& x) { return x[0].cumprod(0); }, {r({4, 3}, 8, 0.5, 1.5)}, 8);
  expect_gradients_match([](const Ts& x) { return x[0].max_with_indices(1).first; }, {r({3, 5}, 9)}, 9);
  expect_gradients_match([](const Ts& x) { return x[0].prod(1); }, {r({3, 4}, 10)}, 10);
  expect_gradients_match([](const Ts& x) { return x[0].softmax(0); }, {r({4, 3}, 11)}, 11);
}

TEST(Gradients, Indexing) {
  Tensor i = idx({2, 0, 1, 1, 3, 0}, {2, 3});
  expect_gradients_match([&](const Ts& x) { return x[0].gather(1, i); }, {r({2, 4}, 20)}, 20);
  expect_gradients_match([&](const Ts& x) { return x[0].scatter_add(1, i, x[1]); },
                         {r({2, 4}, 21), r({2, 3}, 22)}, 21);
  expect_gradients_match(
      [&](const Ts& x) {
        return x[0].index_select(0, idx({2, 0, 2}, {3}));
      },
      {r({3, 4}, 23)}, 23);
  expect_gradients_match([&](const Ts& x) { return x[0].take_along_dim(i, 1); }, {r({2, 4}, 24)}, 24);
  expect_gradients_match(
      [&](const Ts& x) {
        return x[0].index_add(0, idx({1, 1}, {2}), x[1], 0.5);
      },
      {r({3, 2}, 25), r({2, 2}, 26)}, 25);
  expect_gradients_match([](const Ts& x) { return x[0].tril(-1) + x[0].triu(1) * 2; }, {r({4, 4}, 27)}, 27);
  expect_gradients_match([](const Ts& x) { return x[0].topk(2, 1).first; }, {r({3, 5}, 28)}, 28);
  expect_gradients_match([](const Ts& x) { return x[0].sort(0, true).first; }, {r({4, 3}, 29)}, 29);
}

TEST(Gradients, ShapeOps) {
  expect_gradients_match(
      [](const Ts& x) {
        return cat({x[0], x[1]}, 1);
      },
      {r({2, 3}, 40), r({2, 2}, 41)}, 40);
  expect_gradients_match(
      [](const Ts& x) {
        return stack({x[0], x[1]}, 0);
      },
      {r({2, 3}, 42), r({2, 3}, 43)}, 42);
  expect_gradients_match([](const Ts& x) { return x[0].split(2, 1)[1] * x[0].chunk(2, 1)[0]; },
                         {r({3, 4}, 44)}, 44);
  expect_gradients_match([](const Ts& x) { return x[0].repeat({2, 1, 3}); }, {r({2, 3}, 45)}, 45);
  expect_gradients_match([](const Ts& x) { return x[0].tile({2, 2}); }, {r({2, 3}, 46)}, 46);
  expect_gradients_match([](const Ts& x) { return x[0].repeat_interleave(2, 1); }, {r({2, 3}, 47)}, 47);
  expect_gradients_match([](const Ts& x) { return x[0].roll({1, -1}, {0, 1}); }, {r({3, 4}, 48)}, 48);
  expect_gradients_match([](const Ts& x) { return x[0].narrow(1, 1, 2).unbind(0)[1]; }, {r({3, 4}, 49)}, 49);
  expect_gradients_match([](const Ts& x) { return x[0].pad({1, 2}, "reflect"); }, {r({2, 4}, 50)}, 50);
  expect_gradients_match(
      [](const Ts& x) {
        return x[0].pad({2, 1, 1, 0}, "replicate");
      },
      {r({2, 3}, 51)}, 51);
  expect_gradients_match(
      [](const Ts& x) {
        return x[0].unflatten(1, {2, 2}).flatten();
      },
      {r({3, 4}, 52)}, 52);
}

TEST(Gradients, Einsum) {
  expect_gradients_match(
      [](const Ts& x) {
        return einsum("ij,jk->ik", {x[0], x[1]});
      },
      {r({2, 3}, 60), r({3, 4}, 61)}, 60);
  expect_gradients_match(
      [](const Ts& x) {
        return einsum("bij,bjk->bik", {x[0], x[1]});
      },
      {r({2, 2, 3}, 62), r({2, 3, 2}, 63)}, 62);
  expect_gradients_match([](const Ts& x) { return einsum("ii->", {x[0]}); }, {r({3, 3}, 64)}, 64);
}

TEST(Gradients, ConvolutionAndPooling) {
  expect_gradients_match([](const Ts& x) { return F::conv2d(x[0], x[1], x[2], {2}, {1}); },
                         {r({1, 2, 5, 5}, 70), r({3, 2, 3, 3}, 71), r({3}, 72)}, 70);
  expect_gradients_match([](const Ts& x) { return F::conv2d(x[0], x[1], std::nullopt, {1}, {0}, {2}, 2); },
                         {r({1, 2, 5, 5}, 73), r({2, 1, 2, 2}, 74)}, 73);
  expect_gradients_match([](const Ts& x) { return F::conv1d(x[0], x[1], x[2], {1}, {1}); },
                         {r({2, 2, 6}, 75), r({3, 2, 3}, 76), r({3}, 77)}, 75);
  expect_gradients_match([](const Ts& x) { return F::conv_transpose2d(x[0], x[1], x[2], {2}, {1}, {1}); },
                         {r({1, 2, 3, 3}, 78), r({2, 2, 3, 3}, 79), r({2}, 80)}, 78);
  expect_gradients_match([](const Ts& x) { return F::max_pool2d(x[0], {2}, {2}); }, {r({1, 2, 4, 4}, 81)},
                         81);
  expect_gradients_match([](const Ts& x) { return F::avg_pool2d(x[0], {3}, {2}, {1}, false); },
                         {r({1, 2, 5, 5}, 82)}, 82);
  expect_gradients_match(
      [](const Ts& x) {
        return F::adaptive_avg_pool2d(x[0], {2, 3});
      },
      {r({1, 1, 5, 7}, 83)}, 83);
  expect_gradients_match(
      [](const Ts& x) {
        return F::interpolate(x[0], {5, 6}, "bilinear", false);
      },
      {r({1, 1, 3, 4}, 84)}, 84);
  expect_gradients_match([](const Ts& x) { return F::interpolate(x[0], 2.0, "nearest"); },
                         {r({1, 1, 2, 3}, 85)}, 85);
}

TEST(Gradients, MathOps) {
  using Fn = std::function<Tensor(const Tensor&)>;
  std::vector<std::tuple<const char*, Fn, double, double>> ops = {
      {"log1p", [](const Tensor& x) { return x.log1p(); }, -0.5, 2},
      {"expm1", [](const Tensor& x) { return x.expm1(); }, -2, 2},
      {"erf", [](const Tensor& x) { return x.erf(); }, -2, 2},
      {"square", [](const Tensor& x) { return x.square(); }, -2, 2},
      {"clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.7); }, -2, 2},
      {"tan", [](const Tensor& x) { return x.tan(); }, -1, 1},
      {"asin", [](const Tensor& x) { return x.asin(); }, -0.9, 0.9},
      {"acos", [](const Tensor& x) { return x.acos(); }, -0.9, 0.9},
      {"atan", [](const Tensor& x) { return x.atan(); }, -3, 3},
      {"sinh", [](const Tensor& x) { return x.sinh(); }, -2, 2},
      {"cosh", [](const Tensor& x) { return x.cosh(); }, -2, 2},
      {"asinh", [](const Tensor& x) { return x.asinh(); }, -3, 3},
      {"acosh", [](const Tensor& x) { return x.acosh(); }, 1.1, 3},
      {"atanh", [](const Tensor& x) { return x.atanh(); }, -0.9, 0.9},
      {"softplus", [](const Tensor& x) { return x.softplus(); }, -3, 3},
      {"silu", [](const Tensor& x) { return x.silu(); }, -3, 3},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return x.gelu(true); }, -3, 3},
      {"elu", [](const Tensor& x) { return x.elu(0.7); }, -3, 3},
      {"selu", [](const Tensor& x) { return x.selu(); }, -3, 3},
      {"leaky_relu", [](const Tensor& x) { return x.leaky_relu(0.1); }, -3, 3},
      {"hardtanh", [](const Tensor& x) { return x.hardtanh(-0.5, 0.5); }, -2, 2},
      {"relu6", [](const Tensor& x) { return (x * 4).relu6(); }, -2, 2},
      {"logsigmoid", [](const Tensor& x) { return x.logsigmoid(); }, -5, 5},
      {"mish", [](const Tensor& x) { return x.mish(); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, -3, 3},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, -3, 3},
  };
  uint64_t seed = 100;
  for (auto& [name, f, lo, hi] : ops) {
    SCOPED_TRACE(name);
    Fn fn = f;
    expect_gradients_match([&](const Ts& x) { return fn(x[0]); }, {r({2, 5}, seed, lo, hi)}, seed);
    seed++;
  }
  expect_gradients_match([](const Ts& x) { return x[0].atan2(x[1]); }, {r({2, 3}, 130), r({2, 3}, 131)}, 130);
  expect_gradients_match([](const Ts& x) { return x[0].lerp(x[1], x[2]); },
                         {r({3}, 132), r({3}, 133), r({3}, 134)}, 132);
  expect_gradients_match([](const Ts& x) { return x[0].masked_fill(x[0] > 0.5, 0.0); }, {r({3, 4}, 135)},
                         135);
}

TEST(Gradients, Normalization) {
  expect_gradients_match([](const Ts& x) { return F::layer_norm(x[0], {4}, x[1], x[2]); },
                         {r({3, 4}, 140), r({4}, 141), r({4}, 142)}, 140);
  expect_gradients_match([](const Ts& x) { return F::rms_norm(x[0], {4}, x[1]); },
                         {r({3, 4}, 143), r({4}, 144)}, 143);
  expect_gradients_match([](const Ts& x) { return F::group_norm(x[0], 2, x[1], x[2]); },
                         {r({2, 4, 3}, 145), r({4}, 146), r({4}, 147)}, 145);
  expect_gradients_match([](const Ts& x) { return F::batch_norm(x[0], nullptr, nullptr, x[1], x[2], true); },
                         {r({4, 3, 2}, 148), r({3}, 149), r({3}, 150)}, 148);
  Tensor ids = tensor(std::vector<int64_t>{2, 0, 2, 1}, {2, 2});
  expect_gradients_match([&](const Ts& x) { return F::embedding(ids, x[0]); }, {r({3, 4}, 151)}, 151);
}

TEST(Gradients, Losses) {
  Tensor cls = tensor(std::vector<int64_t>{1, 0, 3, 1}, {4});
  expect_gradients_match([&](const Ts& x) { return F::cross_entropy(x[0], cls); }, {r({4, 4}, 160)}, 160);
  expect_gradients_match([&](const Ts& x) { return F::cross_entropy(x[0], cls, x[1], 3, "sum", 0.1); },
                         {r({4, 4}, 161), r({4}, 162, 0.5, 2)}, 161);
  expect_gradients_match([&](const Ts& x) { return F::cross_entropy(x[0], x[1].softmax(1)); },
                         {r({3, 4}, 163), r({3, 4}, 164)}, 163);
  expect_gradients_match(
      [&](const Ts& x) { return F::nll_loss(x[0].log_softmax(1), cls, std::nullopt, -100, "none"); },
      {r({4, 4}, 165)}, 165);
  expect_gradients_match([](const Ts& x) { return F::mse_loss(x[0], x[1]); },
                         {r({3, 4}, 166), r({3, 4}, 167)}, 166);
  expect_gradients_match([](const Ts& x) { return F::l1_loss(x[0], x[1], "sum"); },
                         {r({3, 4}, 168), r({3, 4}, 169)}, 168);
  expect_gradients_match([](const Ts& x) { return F::smooth_l1_loss(x[0], x[1], "mean", 0.5); },
                         {r({3, 4}, 170), r({3, 4}, 171)}, 170);
  expect_gradients_match([](const Ts& x) { return F::huber_loss(x[0], x[1], "mean", 0.7); },
                         {r({3, 4}, 172), r({3, 4}, 173)}, 172);
  expect_gradients_match([](const Ts& x) { return F::binary_cross_entropy(x[0].sigmoid(), x[1].sigmoid()); },
                         {r({3, 4}, 174), r({3, 4}, 175)}, 174);
  expect_gradients_match(
      [](const Ts& x) {
        return F::binary_cross_entropy_with_logits(x[0], x[1].sigmoid(), std::nullopt, "mean", x[2]);
      },
      {r({3, 4}, 176), r({3, 4}, 177), r({4}, 178, 0.5, 2)}, 176);
  expect_gradients_match(
      [](const Ts& x) { return F::kl_div(x[0].log_softmax(1), x[1].softmax(1), "batchmean"); },
      {r({3, 4}, 179), r({3, 4}, 180)}, 179);
}

// A max's gradient picks the elements equal to the max, recomputed in the gradient's kernel: the
// value must have the same bits there as in the max's own kernel. tanh divides by a reciprocal the
// gradient's kernel shares with other values; a division rendered one way in one kernel and as a
// multiply by the shared reciprocal in the other made every element differ from the max (f32).
TEST(Gradients, MaxOfARecomputedValueFindsItsElement) {
  Tensor x = tensor(std::vector<float>{0.871203959f, -0.353006095f}, {2});
  for (auto f : {+[](const Tensor& v) { return v.tanh(); },
                 +[](const Tensor& v) { return (v.tanh() * v.tanh() + 0.5).log(); }}) {
    Tensor y = f(x), m = y.max(std::vector<int64_t>{0}, false);
    std::vector<float> g = grad({m}, {x})[0].to_vector<float>();
    std::vector<float> want = grad({y.index({0})}, {x})[0].to_vector<float>();
    EXPECT_NEAR(g[0], want[0], 1e-6);
    EXPECT_GT(std::fabs(g[0]), 0.1f);
    EXPECT_EQ(g[1], 0.f);
  }
}
