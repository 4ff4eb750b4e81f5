// kiln::Autocast: scopes, the dtype each op list returns, an autocast matmul forward and backward
// against the reference interpreter and float64, f32 gradients and optimizer state for f32
// parameters, casts that fuse (no extra kernels), and a training step that stays one lazy graph
// that kiln::Jit captures.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"
#include "nn/nn_check.h"

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;

namespace {

// max |got - want| / max |want| over all elements
double rel_max_err(const Tensor& got, const Tensor& want) {
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size(); i++) err = std::max(err, std::abs(g[i] - w[i]));
  for (double v : w) scale = std::max(scale, std::abs(v));
  return err / scale;
}

}  // namespace

TEST(Autocast, ScopesNestAndTurnOff) {
  EXPECT_FALSE(autocast_dtype());
  {
    Autocast bf16(DType::BF16);
    EXPECT_EQ(autocast_dtype(), DType::BF16);
    {
      Autocast off(std::nullopt);
      EXPECT_FALSE(autocast_dtype());
      Tensor a = ones({2, 2});
      EXPECT_EQ(a.matmul(a).dtype(), DType::F32);
      Autocast f16(DType::F16);
      EXPECT_EQ(a.matmul(a).dtype(), DType::F16);
    }
    EXPECT_EQ(autocast_dtype(), DType::BF16);
  }
  EXPECT_FALSE(autocast_dtype());
  expect_error([] { Autocast bad(DType::F32); }, {"Autocast", "bf16 or f16", "f32"});
  EXPECT_FALSE(autocast_dtype());
}

TEST(Autocast, DtypeOfEachOpList) {
  Tensor x = random_tensor({2, 4, 8}, DType::F32, -1, 1, 1), w = random_tensor({6, 8}, DType::F32, -1, 1, 2);
  Tensor b = zeros({6}), h = x.to(DType::BF16);
  Autocast bf16(DType::BF16);
  // lower precision: matmul-like ops, their f32 inputs and bias cast down
  EXPECT_EQ(x.matmul(w.t()).dtype(), DType::BF16);
  EXPECT_EQ(F::linear(x, w, b).dtype(), DType::BF16);
  EXPECT_EQ(nn::Linear(8, 6)(x).dtype(), DType::BF16);
  EXPECT_EQ(x.reshape({-1}).dot(x.reshape({-1})).dtype(), DType::BF16);
  EXPECT_EQ(einsum("btc,oc->bto", {x, w}).dtype(), DType::BF16);
  EXPECT_EQ(einsum("btc->bt", {x}).dtype(), DType::F32);  // one operand: a sum, not a matmul
  EXPECT_EQ(F::conv1d(x, ones({3, 4, 2}), ones({3})).dtype(), DType::BF16);
  EXPECT_EQ(F::scaled_dot_product_attention(x, x, x, {.is_causal = true}).dtype(), DType::BF16);
  EXPECT_EQ(x.to(DType::F64).matmul(w.to(DType::F64).t()).dtype(), DType::F64);  // f64 is never cast
  EXPECT_EQ(arange(4).reshape({2, 2}).matmul(arange(4).reshape({2, 2})).dtype(), DType::I64);
  // f32: softmax, reductions, norms, losses, exp/log/pow take half inputs in f32
  EXPECT_EQ(h.softmax(-1).dtype(), DType::F32);
  EXPECT_EQ(x.softmax(-1).dtype(), DType::F32);
  EXPECT_EQ(h.log_softmax(-1).dtype(), DType::F32);
  EXPECT_EQ(h.sum().dtype(), DType::F32);
  EXPECT_EQ(h.mean(-1).dtype(), DType::F32);
  EXPECT_EQ(h.var({-1}).dtype(), DType::F32);
  EXPECT_EQ(h.exp().dtype(), DType::F32);
  EXPECT_EQ(h.log().dtype(), DType::F32);
  EXPECT_EQ(h.pow(2.5).dtype(), DType::F32);
  EXPECT_EQ(F::layer_norm(h, {8}, ones({8}), zeros({8})).dtype(), DType::F32);
  EXPECT_EQ(F::cross_entropy(h.reshape({-1, 8}), zeros({8}, {.dtype = DType::I64})).dtype(), DType::F32);
  // everything else: type promotion, and the half dtype kept
  EXPECT_EQ((h + x).dtype(), DType::F32);
  EXPECT_EQ((h * h).dtype(), DType::BF16);
  EXPECT_EQ((h / h).dtype(), DType::BF16);
  EXPECT_EQ((h / 3.0).dtype(), DType::BF16);
  EXPECT_EQ(h.gelu(true).dtype(), DType::BF16);
  EXPECT_EQ(h.max(-1).dtype(), DType::BF16);
  EXPECT_EQ(F::avg_pool1d(h, {2}).dtype(), DType::BF16);
  EXPECT_EQ(h.reshape({-1}).scatter_add(0, arange(4), ones({4}, {.dtype = DType::BF16})).dtype(),
            DType::BF16);
}

// An autocast matmul in bf16 against the reference interpreter (float64 over the same graph: the
// same bf16 inputs) and against the float64 product of the f32 inputs, forward and backward. bf16
// keeps 8 significant bits: each input rounds by at most 2^-9 relative and the output once more,
// so the result is within about 3 * 2^-9 (0.6%) of sum|a||b|; 1.5% of the largest output leaves
// room for cancellation.
TEST(Autocast, MatmulForwardBackwardWithinBf16Tolerance) {
  Tensor a = random_tensor({16, 64}, DType::F32, -1, 1, 3).requires_grad_();
  Tensor b = random_tensor({64, 24}, DType::F32, -1, 1, 4).requires_grad_();
  Tensor g = random_tensor({16, 24}, DType::F32, -1, 1, 5);
  Tensor c;
  {
    Autocast bf16(DType::BF16);
    c = a.matmul(b);
  }
  ASSERT_EQ(c.dtype(), DType::BF16);
  expect_matches_reference(c, 1e-2, 1e-2);
  Tensor want = a.detach().to(DType::F64).matmul(b.detach().to(DType::F64));
  EXPECT_LT(rel_max_err(c, want), 0.015);

  (c * g).sum().backward();
  ASSERT_EQ(a.grad().dtype(), DType::F32);  // the leaves' dtype: f32 master weights get f32 gradients
  ASSERT_EQ(b.grad().dtype(), DType::F32);
  expect_matches_reference(a.grad(), 1e-2, 1e-2);
  expect_matches_reference(b.grad(), 1e-2, 1e-2);
  Tensor g64 = g.to(DType::F64);
  EXPECT_LT(rel_max_err(a.grad(), g64.matmul(b.detach().to(DType::F64).t())), 0.015);
  EXPECT_LT(rel_max_err(b.grad(), a.detach().to(DType::F64).t().matmul(g64)), 0.015);
}

// bf16 matmuls multiply exactly and accumulate in f32: 1000 products of ones sum to 1000 (a bf16
// accumulator stops at 256, where adding 1 rounds away).
TEST(Autocast, MatmulAccumulatesInF32) {
  Tensor a = ones({1, 1000}), b = ones({1000, 1});
  Autocast bf16(DType::BF16);
  Tensor c = a.matmul(b);
  EXPECT_EQ(c.dtype(), DType::BF16);
  EXPECT_EQ(c.item<float>(), 1000.0f);
}

TEST(Autocast, SoftmaxReturnsF32MatchingReference) {
  Tensor x = random_tensor({4, 33}, DType::BF16, -4, 4, 6);
  Autocast bf16(DType::BF16);
  Tensor p = x.softmax(-1);
  EXPECT_EQ(p.dtype(), DType::F32);
  expect_matches_reference(p, 1e-5, 1e-6);  // f32 math over the bf16 values
}

// f32 parameters under autocast: f32 gradients, AdamW state and updates in f32, nothing in the
// optimizer changed.
TEST(Autocast, ParametersGradientsAndAdamWStayF32) {
  manual_seed(8);
  nn::Linear fc(8, 4);
  optim::AdamW opt(fc->parameters(), {.lr = 1e-2});
  Tensor x = random_tensor({5, 8}, DType::F32, -1, 1, 9);
  Tensor loss;
  {
    Autocast bf16(DType::BF16);
    Tensor y = fc(x);
    EXPECT_EQ(y.dtype(), DType::BF16);
    loss = (y * y).mean();
    EXPECT_EQ(loss.dtype(), DType::F32);
  }
  opt.zero_grad();
  loss.backward();
  for (auto& p : fc->parameters()) EXPECT_EQ(p.grad().dtype(), DType::F32);
  opt.step();
  for (auto& p : fc->parameters()) EXPECT_EQ(p.dtype(), DType::F32);
  for (auto& [name, t] : opt.state_dict()) {
    if (name.find("exp_avg") != std::string::npos) {
      EXPECT_EQ(t.dtype(), DType::F32) << name;
    }
  }
}

// The casts are lazy CAST nodes that fuse into their consumers: on the CPU, Linear + GELU + Linear
// runs as many kernels under autocast as in f32 (each matmul's reduce is a kernel; the casts of x and
// of the weights are read inside them, the GELU inside the second). (On a GPU the GEMM library reads
// its operands from memory: each bf16 weight copy is then a kernel of its own.)
TEST(Autocast, CastsFuseIntoTheirConsumers) {
  struct OnCpu {
    Device was = default_device();
    OnCpu() { set_default_device(Device::cpu()); }
    ~OnCpu() { set_default_device(was); }
  } on_cpu;
  manual_seed(10);
  nn::Linear fc1(32, 64), fc2(64, 16);
  Tensor x = random_tensor({8, 32}, DType::F32, -1, 1, 11);
  auto kernels = [&](std::optional<DType> dt) {
    Autocast scope(dt);
    Tensor y = fc2(fc1(x).gelu(true));
    EXPECT_EQ(y.dtype(), dt ? *dt : DType::F32);
    int64_t before = stats().kernels_run;
    y.realize();
    return stats().kernels_run - before;
  };
  int64_t f32 = kernels(std::nullopt);
  EXPECT_EQ(kernels(DType::BF16), f32);
}

// A training step under autocast realizes in as many schedules as in f32 (forward, backward and the
// AdamW update are one graph), and kiln::Jit captures it: replays give the eager losses.
TEST(Autocast, TrainingStepIsOneGraphThatJitCaptures) {
  auto run = [](std::optional<DType> dt, bool jit, int64_t* schedules_per_step) {
    manual_seed(12);
    nn::Sequential net(nn::Linear(16, 32), nn::GELU(), nn::Linear(32, 16));
    optim::AdamW opt(net->parameters(), {.lr = 1e-2});
    Tensor x = random_tensor({8, 16}, DType::F32, -1, 1, 13),
           y = random_tensor({8, 16}, DType::F32, -1, 1, 14);
    auto step = [&](const std::vector<Tensor>& in) {
      Autocast scope(dt);
      Tensor loss = F::mse_loss(net(in[0]), in[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      return std::vector<Tensor>{loss};
    };
    Jit jitted(step);
    std::vector<float> losses;
    for (int s = 0; s < 5; s++) {
      int64_t before = stats().schedules;
      losses.push_back((jit ? jitted({x, y}) : step({x, y}))[0].item<float>());
      if (schedules_per_step) *schedules_per_step = stats().schedules - before;
    }
    return losses;
  };
  int64_t f32_schedules = 0, bf16_schedules = 0;
  run(std::nullopt, false, &f32_schedules);
  auto eager = run(DType::BF16, false, &bf16_schedules);
  EXPECT_EQ(bf16_schedules, f32_schedules);
  int64_t replays = stats().jit_replays;
  auto jitted = run(DType::BF16, true, nullptr);
  EXPECT_GT(stats().jit_replays, replays);
  for (size_t i = 0; i < eager.size(); i++) EXPECT_EQ(jitted[i], eager[i]) << "step " << i;
  EXPECT_LT(eager.back(), eager.front());
}
