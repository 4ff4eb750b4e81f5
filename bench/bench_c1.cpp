// C1: out = a*b + tanh(c) at 2048x2048 f32, c (1x2048) broadcast over rows. kiln (one fused kernel,
// all threads) next to a plain C loop compiled -O3 (one thread, and split over the same threads).
// Floor: 3 x 16.8 MB moved; GB/s counts a, b read and out written.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "runtime/thread_pool.h"

extern "C" void c1_plain(float* out, const float* a, const float* b, const float* c, int64_t row_start,
                         int64_t row_end, int64_t cols);
extern "C" void c1_bandwidth(float* out, const float* a, const float* b, const float* c, int64_t row_start,
                             int64_t row_end, int64_t cols);

using namespace kiln;

namespace {
double median_ms(const std::function<void()>& f) { return bench::median_ms(f, 25, 1); }
}  // namespace

int main() {
  const int64_t n = 2048;
  Tensor a = rand({n, n}).realize(), b = rand({n, n}).realize(), c = rand({1, n}).realize();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  std::vector<float> out(static_cast<size_t>(n * n));
  double bytes = 3.0 * n * n * 4;

  Tensor r;
  double kiln_ms = median_ms([&] { r = (a * b + c.tanh()).realize(); });
  double plain1_ms = median_ms([&] { c1_plain(out.data(), av.data(), bv.data(), cv.data(), 0, n, n); });
  double plainT_ms = median_ms([&] {
    runtime::parallel_for(
        n, [&](int64_t s, int64_t e) { c1_plain(out.data(), av.data(), bv.data(), cv.data(), s, e, n); });
  });
  double floor_ms = median_ms([&] {
    runtime::parallel_for(
        n, [&](int64_t s, int64_t e) { c1_bandwidth(out.data(), av.data(), bv.data(), cv.data(), s, e, n); });
  });
  c1_plain(out.data(), av.data(), bv.data(), cv.data(), 0, n, n);
  auto rv = r.to_vector<float>();
  double maxerr = 0;
  for (size_t i = 0; i < rv.size(); i++)
    maxerr = std::max(maxerr, static_cast<double>(std::abs(rv[i] - out[i])));

  std::printf("C1 a*b+tanh(c) %lldx%lld f32, %d threads, max |kiln - plain| = %.2e\n",
              static_cast<long long>(n), static_cast<long long>(n), runtime::num_threads(), maxerr);
  std::printf("%-34s %10s %10s %12s\n", "implementation", "ms", "GB/s", "vs plain/T");
  auto row = [&](const char* name, double ms) {
    std::printf("%-34s %10.3f %10.2f %12.2fx\n", name, ms, bytes / ms * 1e-6, plainT_ms / ms);
  };
  row("kiln (realize incl. scheduling)", kiln_ms);
  row("plain C -O3, 1 thread", plain1_ms);
  row("plain C -O3, all threads", plainT_ms);
  row("floor: a*b+c[j] (no tanh), all thr.", floor_ms);
  std::printf("kiln reaches %.0f%% of the bandwidth floor\n", 100 * floor_ms / kiln_ms);
  return 0;
}
