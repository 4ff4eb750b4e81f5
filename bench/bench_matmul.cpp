// CPU matmul: kiln's generated kernel for f32 1024^3 (and shapes autograd makes: a transposed
// operand, a batched attention-shaped product) next to a plain blocked C loop (matmul_plain.c)
// on the same threads. One JSON line per workload, with GFLOP/s.
#include <kiln/kiln.h>

#include <cstdio>
#include <vector>

#include "bench_util.h"
#include "runtime/thread_pool.h"

extern "C" void matmul_plain(const float* a, const float* b, float* c, float* pack, int64_t m, int64_t n,
                             int64_t k, int64_t row_start, int64_t row_end);

using namespace kiln;

namespace {
void report(const char* name, const char* impl, double ms, double flops) {
  std::printf("{\"workload\": \"%s\", \"impl\": \"%s\", \"ms\": %.3f, \"GFLOP/s\": %.1f}\n", name, impl, ms,
              flops / ms / 1e6);
}
}  // namespace

int main() {
  int threads = runtime::num_threads();
  std::printf("kiln threads %d\n", threads);
  const int64_t N = 1024;
  double flops = 2.0 * N * N * N;
  Tensor a = randn({N, N}).realize(), b = randn({N, N}).realize();
  report("matmul_1024_f32", "kiln", bench::median_ms([&] { matmul(a, b).realize(); }, 7, 2), flops);
  report("matmul_1024_f32_a_transposed", "kiln",
         bench::median_ms([&] { matmul(a.transpose(0, 1), b).realize(); }, 7, 2), flops);
  report("matmul_1024_f32_b_transposed", "kiln",
         bench::median_ms([&] { matmul(a, b.transpose(0, 1)).realize(); }, 7, 2), flops);
  // attention's scores: (B*heads) x T x T over head size 32
  Tensor q = randn({16, 8, 128, 32}).realize(), kt = randn({16, 8, 32, 128}).realize();
  report("bmm_128x8x128x32x128_f32", "kiln", bench::median_ms([&] { matmul(q, kt).realize(); }, 7, 2),
         2.0 * 128 * 128 * 128 * 32);

  // a linear layer's forward as C5 has it (x @ w.T + b, then gelu), and a long reduce
  Tensor x = randn({2048, 256}).realize(), w = randn({1024, 256}).realize(), bias = randn({1024}).realize();
  report("linear_2048x256x1024_gelu_f32", "kiln",
         bench::median_ms([&] { (matmul(x, w.transpose(0, 1)) + bias).gelu(true).realize(); }, 7, 2),
         2.0 * 2048 * 256 * 1024);
  Tensor al = randn({256, 16384}).realize(), bl = randn({16384, 256}).realize();
  report("matmul_256x16384x256_f32", "kiln", bench::median_ms([&] { matmul(al, bl).realize(); }, 7, 2),
         2.0 * 256 * 16384 * 256);

  std::vector<float> ha(N * N), hb(N * N), hc(N * N);
  std::vector<std::vector<float>> pack(static_cast<size_t>(threads), std::vector<float>(256 * N));
  for (size_t i = 0; i < ha.size(); i++)
    ha[i] = static_cast<float>(i % 7) - 3, hb[i] = static_cast<float>(i % 5) - 2;
  int64_t chunk = (N + threads - 1) / threads;
  double ms = bench::median_ms(
      [&] {
        runtime::parallel_for(threads, [&](int64_t s, int64_t e) {
          for (int64_t t = s; t < e; t++)
            matmul_plain(ha.data(), hb.data(), hc.data(), pack[static_cast<size_t>(t)].data(), N, N, N,
                         t * chunk, std::min(N, (t + 1) * chunk));
        });
      },
      7, 2);
  report("matmul_1024_f32", "plain C (blocked, 6x32 tile)", ms, flops);
  return 0;
}
