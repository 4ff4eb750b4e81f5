// Gradient checks (float64; compiled gradient vs reference interpreter vs finite differences) for
// the composite ops: reductions, indexing, shape ops, einsum, convolution and pooling.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

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
