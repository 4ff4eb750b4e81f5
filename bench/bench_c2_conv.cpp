// C2 (layernorm 4096x768 forward, forward+backward) and conv2d (N8 C16 32x32, 3x3 -> 32, pad 1)
// forward and forward+backward on the CPU. Prints one JSON line per workload (the format of
// bench/torch_cpu.py, so run_cpu.sh can put kiln and PyTorch side by side).
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench_util.h"
#include "runtime/thread_pool.h"

using namespace kiln;

namespace {
using bench::median_ms;
void report(const char* name, double ms, double bytes, double flops) {
  std::printf("{\"workload\": \"%s\", \"impl\": \"kiln\", \"ms\": %.3f", name, ms);
  if (bytes > 0) std::printf(", \"GB/s\": %.2f", bytes / ms / 1e6);
  if (flops > 0) std::printf(", \"GFLOP/s\": %.1f", flops / ms / 1e6);
  std::printf("}\n");
}
}  // namespace

int main() {
  std::printf("kiln threads %d\n", runtime::num_threads());
  const int64_t N = 4096, C = 768;
  Tensor x = randn({N, C}).realize(), w = randn({C}).realize(), b = randn({C}).realize();
  Tensor dy = randn({N, C}).realize();
  report("C2_layernorm_fwd_4096x768", median_ms([&] { F::layer_norm(x, {C}, w, b).realize(); }),
         2.0 * N * C * 4, 0);
  report("C2_layernorm_fwdbwd_4096x768", median_ms([&] {
           Tensor y = F::layer_norm(x, {C}, w, b);
           auto g = grad({y}, {x, w, b}, {dy});
           realize({y, g[0], g[1], g[2]});
         }),
         5.0 * N * C * 4, 0);

  Tensor img = randn({8, 16, 32, 32}).realize(), k = randn({32, 16, 3, 3}).realize(),
         kb = randn({32}).realize();
  Tensor dimg = randn({8, 32, 32, 32}).realize();
  double flops = 2.0 * 8 * 32 * 32 * 32 * 16 * 9;
  report("conv2d_fwd_n8c16_32x32_k3_o32", median_ms([&] { F::conv2d(img, k, kb, {1}, {1}).realize(); }), 0,
         flops);
  report("conv2d_fwdbwd_n8c16_32x32_k3_o32", median_ms([&] {
           Tensor y = F::conv2d(img, k, kb, {1}, {1});
           auto g = grad({y}, {img, k, kb}, {dimg});
           realize({y, g[0], g[1], g[2]});
         }),
         0, 3 * flops);
  return 0;
}
