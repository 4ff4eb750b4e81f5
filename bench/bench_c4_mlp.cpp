// C4: MLP 784-512-512-10 training step (batch 128, cross-entropy, AdamW) on the CPU: forward,
// backward and the optimizer update realized as one schedule per step. Prints one JSON line eager
// (graph, schedule and cached programs every step) and one through kiln::Jit (replayed launches).
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
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

// Median ms of 15 steps after 4 warm-up steps; the loss of the first and the last.
struct Run {
  double ms;
  float first, last;
};
Run time_steps(const std::function<Tensor()>& step) {
  float first = step().item<float>();
  for (int i = 0; i < 3; i++) step().item<float>();
  std::vector<double> t;
  float last = 0;
  for (int i = 0; i < 15; i++) {
    auto t0 = std::chrono::steady_clock::now();
    last = step().item<float>();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], first, last};
}

struct Mlp {
  std::vector<Tensor> params;
  Mlp() {
    manual_seed(0);
    std::vector<int64_t> sizes = {784, 512, 512, 10};
    for (size_t i = 0; i + 1 < sizes.size(); i++) {
      params.push_back(uniform_param({sizes[i + 1], sizes[i]}, sizes[i]));
      params.push_back(uniform_param({sizes[i + 1]}, sizes[i]));
    }
  }
  Tensor step(optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
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
  }
};
}  // namespace

int main() {
  std::printf("kiln threads %d\n", runtime::num_threads());
  manual_seed(1);
  Tensor x = randn({128, 784}).realize(), y = randint(0, 10, {128}).realize();
  double flops = 3 * 2.0 * 128 * (784 * 512 + 512 * 512 + 512 * 10);
  for (bool use_jit : {false, true}) {
    Mlp mlp;
    optim::AdamW opt(mlp.params, {.lr = 1e-3});
    // the jitted step takes the batch as inputs: a replay binds new batches into the same kernels
    Jit jitted(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.step(opt, in[0], in[1])}; });
    Run r = use_jit ? time_steps([&] {
      return jitted({x, y})[0];
    })
                    : time_steps([&] { return mlp.step(opt, x, y); });
    std::printf(
        "{\"workload\": \"C4_mlp_train_step_b128\", \"impl\": \"%s\", \"ms\": %.3f, \"GFLOP/s\": %.1f}\n",
        use_jit ? "kiln jit" : "kiln", r.ms, flops / r.ms / 1e6);
    std::printf("loss %.4f -> %.4f over 19 steps on one batch\n", r.first, r.last);
  }
  return 0;
}
