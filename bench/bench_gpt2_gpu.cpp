// G8: GPT-2 124M (the nn GPT model, vocab 50304) training steps on the GPU with AdamW, on random
// tokens: loss per step, median step time, tokens/s and peak device memory as one JSON line. With bf16, the
// forward runs under kiln::Autocast(BF16) (matmuls and attention in bf16, f32 weights, gradients and AdamW
// state); f32 matmuls use TF32. Usage: bench_gpt2_gpu [B] [T] [steps] [jit 0|1] [f32|bf16]   (defaults 4 1024
// 8 0 f32). GPT_SYMBOLIC_B=b: the batch dim is symbolic and odd steps take b rows (one captured step
// serves both sizes; "ms_b" is the median of those steps).
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kiln/debug.h"

using namespace kiln;

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();  // G9 counts from here to the first step's end
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("bench_gpt2_gpu: no usable CUDA GPU (%s)\n", why.c_str());
    return 0;
  }
  int64_t B = argc > 1 ? std::atoll(argv[1]) : 4, T = argc > 2 ? std::atoll(argv[2]) : 1024;
  int steps = argc > 3 ? std::atoi(argv[3]) : 8;
  bool use_jit = argc > 4 && std::atoi(argv[4]) != 0;
  const std::string dtype = argc > 5 ? argv[5] : "f32";
  if (dtype != "f32" && dtype != "bf16") {
    std::fprintf(stderr, "bench_gpt2_gpu: dtype must be f32 or bf16, got %s\n", dtype.c_str());
    return 2;
  }
  const std::optional<DType> autocast = dtype == "bf16" ? std::optional(DType::BF16) : std::nullopt;
  settings().tf32 = dtype == "f32";  // f32 matmuls on TF32 tensor cores, as PyTorch's f32 row allows
  int64_t L = std::getenv("GPT_LAYERS") ? std::atoll(std::getenv("GPT_LAYERS")) : 12;
  const int64_t V = 50304;
  auto seconds = [](auto t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double probe_s = seconds(start);
  set_default_device(Device::cuda());
  manual_seed(0);
  auto t_model = std::chrono::steady_clock::now();
  nn::GPT model(
      nn::GPTConfig{.vocab_size = V, .block_size = 1024, .n_layer = L, .n_head = 12, .n_embd = 768});
  const double model_s = seconds(t_model);
  auto t_opt = std::chrono::steady_clock::now();
  optim::AdamW opt(model->parameters(), {.lr = 3e-4, .weight_decay = 0.0});
  Tensor idx = randint(0, 50257, {B, T}).realize(), tgt = randint(0, 50257, {B, T}).realize();
  const int64_t alt_b = std::getenv("GPT_SYMBOLIC_B") ? std::atoll(std::getenv("GPT_SYMBOLIC_B")) : 0;
  Var batch("B", 1, std::max<int64_t>(B, alt_b));
  Tensor idx_b, tgt_b;
  if (alt_b > 0) {
    idx_b = randint(0, 50257, {alt_b, T}).realize().symbolic(0, batch);
    tgt_b = randint(0, 50257, {alt_b, T}).realize().symbolic(0, batch);
    idx = idx.symbolic(0, batch);
    tgt = tgt.symbolic(0, batch);
  }
  std::fprintf(stderr, "bench_gpt2_gpu: setup: CUDA probe %.2f s, model %.2f s, optimizer and data %.2f s\n",
               probe_s, model_s, seconds(t_opt));
  auto train = [&](const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      Autocast scope(autocast);
      loss = model->forward(x, y).second;
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  Jit jitted([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{train(in[0], in[1])}; });
  std::vector<double> ms, ms_b;
  std::vector<float> losses;
  double first_s = 0, ready_s = 0, first_done_s = 0;
  auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  settings().profile = true;  // device time of each step's kernels (replays are not profiled)
  for (int s = 0; s < steps; s++) {
    double dev0 = stats().device_ms;
    const int64_t replays = stats().jit_replays;
    if (s == 0) ready_s = since_start();  // the device, model, optimizer and data set up
    auto t0 = std::chrono::steady_clock::now();
    const bool odd = alt_b > 0 && s % 2 == 1;
    const Tensor &x = odd ? idx_b : idx, &y = odd ? tgt_b : tgt;
    float loss = (use_jit ? jitted({x, y})[0] : train(x, y)).item<float>();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) {
      first_s = dt;
      first_done_s = since_start();
    }
    // the steady state: with the jit its replays only, else every step from the third on
    if (use_jit ? stats().jit_replays > replays : s >= 2) (odd ? ms_b : ms).push_back(dt * 1e3);
    losses.push_back(loss);
    std::fprintf(stderr, "bench_gpt2_gpu: step %d loss %.4f %.1f ms (kernels %.1f ms)\n", s, loss, dt * 1e3,
                 stats().device_ms - dev0);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(ms_b.begin(), ms_b.end());
  double med = ms.empty() ? first_s * 1e3 : ms[ms.size() / 2];
  if (alt_b > 0)
    std::printf(
        "{\"workload\": \"G8\", \"symbolic_batch\": [%lld, %lld], \"ms_b\": %.1f, \"replays_b\": %zu}\n",
        static_cast<long long>(B), static_cast<long long>(alt_b), ms_b.empty() ? 0.0 : ms_b[ms_b.size() / 2],
        ms_b.size());
  std::printf(
      "{\"workload\": \"G8\", \"name\": \"gpt2_124M_train_step_B%lld_T%lld_%s\", \"impl\": \"kiln%s\", "
      "\"ms\": %.1f, \"tok/s\": %.0f, \"first_step_s\": %.1f, \"setup_s\": %.2f, \"first_step_done_s\": "
      "%.2f, "
      "\"loss_first\": %.4f, \"loss_last\": %.4f, "
      "\"params\": %lld, \"peak_mb\": %.0f}\n",
      static_cast<long long>(B), static_cast<long long>(T), dtype.c_str(), use_jit ? "-jit" : "", med,
      static_cast<double>(B * T) / med * 1e3, first_s, ready_s, first_done_s, losses.front(), losses.back(),
      static_cast<long long>(model->num_parameters()), static_cast<double>(memory_stats().peak) / 1e6);
  return 0;
}
