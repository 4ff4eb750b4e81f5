// Whole models from the op set: a small CNN (conv, batch_norm, relu, max_pool, linear) and a
// transformer block (layer_norm, causal multi-head attention, GELU MLP), forward and backward,
// checked against the reference interpreter and finite differences in float64.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_gradients_match;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;
using Ts = std::vector<Tensor>;

namespace {
Tensor r(Shape s, uint64_t seed, double scale = 1) {
  return random_tensor(s, DType::F64, -scale, scale, seed);
}
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return x.matmul(w.t()) + b; }

// x (N, 3, 6, 6) -> conv 3x3 pad 1 -> batch_norm (batch statistics) -> relu -> max_pool 2 -> linear -> (N, 3)
Tensor cnn(const Ts& p) {
  const Tensor &x = p[0], &cw = p[1], &cb = p[2], &g = p[3], &bt = p[4], &lw = p[5], &lb = p[6];
  Tensor h = F::conv2d(x, cw, cb, {1}, {1});
  h = F::batch_norm(h, nullptr, nullptr, g, bt, true).relu();
  h = F::max_pool2d(h, {2});
  return linear(h.flatten(1), lw, lb);
}
Ts cnn_params() {
  return {r({2, 3, 6, 6}, 1), r({2, 3, 3, 3}, 2, 0.5), r({2}, 3), r({2}, 4),
          r({2}, 5),          r({3, 18}, 6, 0.5),      r({3}, 7)};
}

// One GPT-2 style block: x + attn(ln1(x)), then + mlp(ln2(.)); x (B, T, C), H heads, causal.
Tensor block(const Ts& p) {
  const Tensor& x = p[0];
  int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = 2, D = C / H;
  Tensor h = F::layer_norm(x, {C}, p[1], p[2]);
  auto qkv = linear(h, p[3], p[4]).split(C, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  Tensor causal = ones({T, T}, {.dtype = DType::Bool}).tril();
  att = att.masked_fill(causal.logical_not(), -INFINITY).softmax(-1);
  Tensor y = att.matmul(v).transpose(1, 2).reshape({B, T, C});
  Tensor x1 = x + linear(y, p[5], p[6]);
  Tensor m = linear(F::layer_norm(x1, {C}, p[7], p[8]), p[9], p[10]).gelu(true);
  return x1 + linear(m, p[11], p[12]);
}
Ts block_params() {
  int64_t C = 8;
  return {r({2, 4, C}, 10),       r({C}, 11),          r({C}, 12),
          r({3 * C, C}, 13, 0.4), r({3 * C}, 14, 0.1), r({C, C}, 15, 0.4),
          r({C}, 16, 0.1),        r({C}, 17),          r({C}, 18),
          r({4 * C, C}, 19, 0.4), r({4 * C}, 20, 0.1), r({C, 4 * C}, 21, 0.3),
          r({C}, 22, 0.1)};
}
}  // namespace

TEST(Models, CnnForwardMatchesReference) {
  Ts p = cnn_params();
  expect_matches_reference(cnn(p), 1e-9, 1e-12);
  Tensor labels = tensor(std::vector<int64_t>{2, 0});
  expect_matches_reference(F::cross_entropy(cnn(p), labels), 1e-9, 1e-12);
}

TEST(Models, CnnBackwardMatchesFiniteDifferences) {
  Tensor labels = tensor(std::vector<int64_t>{2, 0});
  expect_gradients_match([&](const Ts& p) { return F::cross_entropy(cnn(p), labels); }, cnn_params(), 31);
}

TEST(Models, TransformerBlockForwardMatchesReference) {
  expect_matches_reference(block(block_params()), 1e-9, 1e-12);
}

TEST(Models, TransformerBlockBackwardMatchesFiniteDifferences) {
  expect_gradients_match(block, block_params(), 32);
}

TEST(Models, TransformerBlockTrainsInFloat32) {
  // the same block in f32: loss of a regression target falls under plain gradient descent
  Ts p;
  for (auto& t : block_params()) p.push_back(t.to(DType::F32).contiguous().realize());
  Tensor target = random_tensor({2, 4, 8}, DType::F32, -1, 1, 40);
  auto loss_of = [&](const Ts& q) { return F::mse_loss(block(q), target); };
  float first = loss_of(p).item<float>(), last = first;
  for (int step = 0; step < 20; step++) {
    Ts params(p.begin() + 1, p.end());
    Tensor loss = loss_of(p);
    auto g = grad({loss}, params);
    for (size_t i = 0; i < params.size(); i++) p[i + 1] = (params[i] - g[i] * 0.05).contiguous();
    realize(Ts(p.begin() + 1, p.end()));
    last = loss.item<float>();
  }
  EXPECT_LT(last, first * 0.7f) << "first " << first << ", last " << last;
}
