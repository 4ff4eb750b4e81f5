// nn::GPT trained under bf16 autocast tracks the same model trained in f32: 50 AdamW steps from one
// initialization on the same batches, on the CPU and (where there is one) on a GPU.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "helpers.h"

using namespace kiln;

namespace {

// Losses of 50 AdamW steps of a tiny GPT (2 layers, n_embd 64, vocab 96, T 32, B 4) on batches of a
// learnable sequence: token t+1 = (5 * token t + 7) mod 96 from random starts.
std::vector<float> train(std::optional<DType> autocast, int64_t n_head = 4) {
  manual_seed(21);
  nn::GPT model(nn::GPTConfig{.vocab_size = 96,
                              .block_size = 32,
                              .n_layer = 2,
                              .n_head = n_head,
                              .n_embd = 64,
                              .dropout = 0,
                              .bias = true});
  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  std::mt19937 rng(22);
  std::uniform_int_distribution<int64_t> start(0, 95);
  const int64_t B = 4, T = 32;
  // the step captured by kiln::Jit (its autocast casts included) and replayed: scheduling 100
  // eager steps would take most of the test's time
  Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss;
    {
      Autocast scope(autocast);
      loss = model(in[0], in[1]).second;
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  });
  std::vector<float> losses;
  for (int s = 0; s < 50; s++) {
    std::vector<int64_t> x, y;
    for (int64_t b = 0; b < B; b++) {
      int64_t t = start(rng);
      for (int64_t i = 0; i < T; i++) x.push_back(t), t = (5 * t + 7) % 96, y.push_back(t);
    }
    losses.push_back(step({tensor(x, {B, T}), tensor(y, {B, T})})[0].item<float>());
  }
  return losses;
}

// Tolerance: |loss_bf16 - loss_f32| < 0.02 * loss_f32 at every step, and both runs learn (the last
// loss below half the first). bf16 rounds every matmul input and output to 8 significant bits
// (about 0.4%), and the two runs' weights drift apart by what that changes in each update; seen on
// the CPU: at most 0.16% (the loss falls from 4.58 to 0.31). The bound leaves ten times that for
// other compilers, vector widths and devices, and still fails a real precision bug: with bf16
// master weights (the model in bf16, AdamW's small updates rounded away) the curve is 6% above
// f32's by step 22 and 14% by step 31.
void expect_tracks(const std::vector<float>& f32, const std::vector<float>& bf16) {
  double worst = 0;
  for (size_t i = 0; i < f32.size(); i++) {
    double dev = std::abs(bf16[i] - f32[i]) / f32[i];
    worst = std::max(worst, dev);
    EXPECT_LT(dev, 0.02) << "step " << i << ": f32 " << f32[i] << ", bf16 " << bf16[i];
  }
  std::printf("bf16 vs f32 loss: first %.4f / %.4f, last %.4f / %.4f, max relative deviation %.4f\n", bf16[0],
              f32[0], bf16.back(), f32.back(), worst);
  EXPECT_LT(f32.back(), 0.5 * f32.front());
  EXPECT_LT(bf16.back(), 0.5 * bf16.front());
}

}  // namespace

// The forward's dtypes (bf16 logits from the tied head, f32 loss) and values: the compiled kernels
// against the reference interpreter over the same graph, within bf16's rounding of the logits.
TEST(GptAutocast, ForwardDtypesAndReference) {
  manual_seed(23);
  nn::GPT g(nn::GPTConfig{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16});
  Tensor idx = tensor(std::vector<int64_t>{1, 4, 2, 8, 5, 7, 3, 0, 9, 10}, {2, 5});
  Autocast bf16(DType::BF16);
  auto [logits, loss] = g(idx, idx);
  EXPECT_EQ(logits.dtype(), DType::BF16);
  EXPECT_EQ(loss.dtype(), DType::F32);
  kiln::testing::expect_matches_reference(logits, 2e-2, 2e-2);
  kiln::testing::expect_matches_reference(loss, 1e-2, 1e-2);
}

TEST(GptAutocast, Bf16LossCurveTracksF32) { expect_tracks(train(std::nullopt), train(DType::BF16)); }

// On a GPU: bf16 GEMMs in cuBLASLt (f32 accumulation) and, with one head of 64 on sm_80 and newer,
// the flash-attention kernel; the same tolerance.
class GptAutocastGpu : public kiln::testing::GpuTest {};
TEST_F(GptAutocastGpu, Bf16LossCurveTracksF32) {
  struct OnGpu {
    Device was = default_device();
    explicit OnGpu(Device d) { set_default_device(d); }
    ~OnGpu() { set_default_device(was); }
  } on_gpu(gpu);
  auto f32 = train(std::nullopt, 1);
  Stats before = stats();
  auto bf16 = train(DType::BF16, 1);
  std::printf("bf16 steps: %lld GEMM library calls, %lld flash-attention kernels\n",
              static_cast<long long>(stats().gemm_launches - before.gemm_launches),
              static_cast<long long>(stats().attention_launches - before.attention_launches));
  expect_tracks(f32, bf16);
}
