// Generation with nn::GPT's key/value cache: GPT-2 124M shape with random weights, a random prompt
// of P tokens, N new tokens sampled (temperature 1, top_k 50), batch 1 and 8, on the default
// device (KILN_DEVICE), each step's tokens read to the host as they come (streaming, as
// bench/torch_generate.py does). One JSON line per batch: time to first token (the prompt's forward
// and the first draw), decoding tokens/s after it, the kernels compiled by the timed run (0:
// warm), and what a step's cache writes cost (each step's K and V columns stored in place into every
// layer's (B, H, block_size, D) cache by index_copy_, timed here alone).
// bench/torch_generate.py prints the same fields for PyTorch.
// Usage: bench_generate [--small] [--eager] [--layers L] [--prompt P] [--new N] [--batch B,B,...]
//   --small: vocab 512, block 256, 2 layers of 128 (4 heads), P 16, N 32 (a smoke run)
//   --eager: each decoding step scheduled and run as it comes, not replayed (KILN_DEBUG=2 times
//            its kernels)
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/debug.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < s.size();) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    v.push_back(std::atoll(s.substr(i, j - i).c_str()));
    i = j + 1;
  }
  return v;
}
}  // namespace

// Median ms of one decoding step's cache writes alone: 2 * n_layer caches (B, H, L, D), each
// given one new column at a tensor-valued position, as MultiheadAttention does.
double cache_write_ms(const nn::GPTConfig& c, int64_t B) {
  int64_t H = c.n_head, D = c.n_embd / H, L = c.block_size;
  std::vector<Tensor> caches;  // values of their own, so buffers of their own
  for (int64_t i = 0; i < 2 * c.n_layer; i++)
    caches.push_back((zeros({B, H, L, D}) + static_cast<double>(i)).realize());
  Tensor col = tensor(std::vector<int64_t>{L / 2}), x = randn({B, H, 1, D}).realize();
  std::vector<double> ms;
  for (int rep = 0; rep < 7; rep++) {
    Clock::time_point t0 = Clock::now();
    for (auto& k : caches) k.index_copy_(2, col, x);
    realize(caches);
    ms.push_back(seconds(t0, Clock::now()) * 1e3);
  }
  std::sort(ms.begin() + 1, ms.end());  // the first compiles
  return ms[4];
}

int main(int argc, char** argv) {
  nn::GPTConfig cfg{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768};
  int64_t P = 64, N = 256;
  std::vector<int64_t> batches = {1, 8};
  bool jit = true;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--small") {
      cfg = {.vocab_size = 512, .block_size = 256, .n_layer = 2, .n_head = 4, .n_embd = 128};
      P = 16, N = 32;
    } else if (a == "--eager") {
      jit = false;
    } else if (a == "--layers" && has_value) {
      cfg.n_layer = std::atoll(argv[++i]);
    } else if (a == "--prompt" && has_value) {
      P = std::atoll(argv[++i]);
    } else if (a == "--new" && has_value) {
      N = std::atoll(argv[++i]);
    } else if (a == "--batch" && has_value) {
      batches = parse_list(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: bench_generate [--small] [--eager] [--layers L] [--prompt P] [--new N] [--batch B,B,...]\n");
      return 2;
    }
  }
  if (P < 1 || N < 2 || P + N > cfg.block_size || cfg.n_layer < 1) {
    std::fprintf(stderr, "bench_generate: need L >= 1, P >= 1, N >= 2 and P + N <= block_size %lld\n",
                 static_cast<long long>(cfg.block_size));
    return 2;
  }
  manual_seed(0);
  nn::GPT model(cfg);
  model->eval();
  const std::string name = cfg.n_layer == 12 && cfg.n_embd == 768 ? "gpt2_124M" : "gpt_small";
  for (int64_t B : batches) {
    Generator data(1);
    Tensor prompt = randint(0, cfg.vocab_size, {B, P}, data).realize();
    // warm-up, twice (as bench/torch_generate.py): compiles the prompt's and the decoding step's
    // kernels (every step runs the same ones) and captures both steps
    for (int w = 0; w < 2; w++) model->generate(prompt, 3, {.top_k = 50, .jit = jit});
    Generator gen(2);
    int64_t compiled = stats().kernels_compiled;
    Clock::time_point start = Clock::now(), first;
    int64_t seen = 0;
    model->generate(prompt, N, {.top_k = 50, .jit = jit, .generator = &gen, .on_token = [&](const Tensor& t) {
                                  t.to_vector<int64_t>();  // streamed: each step's tokens read
                                  if (seen++ == 0) first = Clock::now();
                                }});
    Clock::time_point end = Clock::now();
    double ttft = seconds(start, first), decode = seconds(first, end);
    compiled = stats().kernels_compiled - compiled;
    double write_ms = cache_write_ms(cfg, B);
    std::printf(
        "{\"workload\": \"generate\", \"name\": \"%s_generate_B%lld_P%lld_N%lld\", \"impl\": \"kiln\", "
        "\"device\": \"%s\", \"batch\": %lld, \"prompt\": %lld, \"new_tokens\": %lld, \"ttft_ms\": %.1f, "
        "\"tok/s\": %.1f, \"ms_per_step\": %.2f, \"total_s\": %.2f, \"kernels_compiled\": %lld, "
        "\"cache_write_ms\": %.2f}\n",
        name.c_str(), static_cast<long long>(B), static_cast<long long>(P), static_cast<long long>(N),
        prompt.device().str().c_str(), static_cast<long long>(B), static_cast<long long>(P),
        static_cast<long long>(N), ttft * 1e3, static_cast<double>(B * (N - 1)) / decode,
        decode * 1e3 / static_cast<double>(N - 1), seconds(start, end), static_cast<long long>(compiled),
        write_ms);
    std::fflush(stdout);
  }
  return 0;
}
