// C5: a small GPT training step on the CPU (6 layers, width 256, 8 heads, T=128, B=16, vocab 65,
// cross-entropy, AdamW lr 3e-4): median step time of 5 after 3 warm-up steps, as one JSON line
// eager and one through kiln::Jit (replayed launches). `bench_c5_gpt symbolic` adds an eager step
// whose batch dim is a kiln::Var (kernels compiled for every batch size).
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/thread_pool.h"

using namespace kiln;

int main(int argc, char** argv) {
  const bool symbolic = argc > 1 && std::string(argv[1]) == "symbolic";
  std::printf("kiln threads %d\n", runtime::num_threads());
  const int64_t B = 16, T = 128, V = 65;
  manual_seed(1);
  Tensor idx = randint(0, V, {B, T}).realize(), tgt = randint(0, V, {B, T}).realize();
  std::vector<int> modes{0, 1};  // eager, jit, eager with a symbolic batch dim
  if (symbolic) modes.push_back(2);
  for (int mode : modes) {
    const bool use_jit = mode == 1;
    Var batch("B", 1, 64);
    manual_seed(0);
    nn::GPT model(nn::GPTConfig{.vocab_size = V, .block_size = T, .n_layer = 6, .n_head = 8, .n_embd = 256});
    optim::AdamW opt(model->parameters(), {.lr = 3e-4});
    auto train = [&](const Tensor& x, const Tensor& y) {
      auto [logits, loss] = model->forward(x, y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      return loss;
    };
    Jit jitted([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{train(in[0], in[1])}; });
    auto step = [&] {
      if (mode == 2) return train(idx.symbolic(0, batch), tgt.symbolic(0, batch)).item<float>();
      return (use_jit ? jitted({idx, tgt})[0] : train(idx, tgt)).item<float>();
    };
    auto t0 = std::chrono::steady_clock::now();
    float first = step();
    double first_ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
    step();
    step();
    std::vector<double> t;
    float last = 0;
    for (int i = 0; i < 5; i++) {
      auto s = std::chrono::steady_clock::now();
      last = step();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count() * 1e3);
    }
    std::sort(t.begin(), t.end());
    double ms = t[t.size() / 2];
    std::printf(
        "{\"workload\": \"C5_gpt6x256_T128_B16_train_step\", \"impl\": \"%s\", \"ms\": %.3f, \"tok/s\": "
        "%lld}\n",
        mode == 1   ? "kiln jit"
        : mode == 2 ? "kiln symbolic batch"
                    : "kiln",
        ms, static_cast<long long>(static_cast<double>(B * T) / ms * 1000));
    std::printf(
        "first step (with compiling) %.0f ms; loss %.4f -> %.4f over 8 steps on one batch; %lld parameters\n",
        first_ms, first, last, static_cast<long long>(model->num_parameters()));
  }
  return 0;
}
