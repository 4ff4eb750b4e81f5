// C4: MLP 784-512-512-10 training step (batch 128, cross-entropy, AdamW) on the CPU: forward,
// backward and the optimizer update realized as one schedule per step. Prints one JSON line per
// workload, with the time split into scheduling (graph rewrites, fusion, lowering: work a captured
// step would not redo) and the rest.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/thread_pool.h"

using namespace kiln;

namespace {
// PyTorch's nn.Linear initialization: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
Tensor uniform_param(Shape s, int64_t fan_in) {
  double b = 1 / std::sqrt(static_cast<double>(fan_in));
  Tensor p = rand(s) * (2 * b) - b;
  return p.requires_grad_();
}
}  // namespace

int main() {
  std::printf("kiln threads %d\n", runtime::num_threads());
  manual_seed(0);
  std::vector<int64_t> sizes = {784, 512, 512, 10};
  std::vector<Tensor> params;
  for (size_t i = 0; i + 1 < sizes.size(); i++) {
    params.push_back(uniform_param({sizes[i + 1], sizes[i]}, sizes[i]));
    params.push_back(uniform_param({sizes[i + 1]}, sizes[i]));
  }
  optim::AdamW opt(params, {.lr = 1e-3});
  Tensor x = randn({128, 784}).realize(), y = randint(0, 10, {128}).realize();
  auto step = [&] {
    Tensor h = x;
    for (size_t i = 0; i < params.size(); i += 2) {
      h = h.matmul(params[i].t()) + params[i + 1];
      if (i + 2 < params.size()) h = h.relu();
    }
    Tensor loss = F::cross_entropy(h, y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  float first = step().item<float>();
  for (int i = 0; i < 3; i++) step();
  std::vector<double> t;
  float last = 0;
  for (int i = 0; i < 15; i++) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = step();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    last = loss.item<float>();
  }
  std::sort(t.begin(), t.end());
  double flops = 3 * 2.0 * 128 * (784 * 512 + 512 * 512 + 512 * 10);
  std::printf(
      "{\"workload\": \"C4_mlp_train_step_b128\", \"impl\": \"kiln\", \"ms\": %.3f, \"GFLOP/s\": %.1f}\n",
      t[t.size() / 2], flops / t[t.size() / 2] / 1e6);
  std::printf("loss %.4f -> %.4f over 19 steps on one batch\n", first, last);
  return 0;
}
