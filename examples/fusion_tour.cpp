// A tour of the compiler: write tensor expressions, watch them fuse into a few kernels, compile to C
// and run on every core. Try: KILN_DEBUG=2 build/examples/fusion_tour   (or 3, 4, 5 to see more)
#include <kiln/kiln.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

using namespace kiln;

namespace {
int64_t kernels_in(const Tensor& t) {
  int64_t before = stats().kernels_run;
  t.realize();
  return stats().kernels_run - before;
}
}  // namespace

int main() try {
  manual_seed(0);
  std::cout << "kiln: lazy tensors -> fused kernels -> generated C\n\n";

  Tensor a = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  std::cout << "a =\n" << a << "\n";
  std::cout << "a.t() =\n" << a.t() << "\n";
  std::cout << "a.softmax(1) =\n" << a.softmax(1) << "\n";
  std::cout << "a.matmul(a.t()) =\n" << a.matmul(a.t()) << "\n\n";

  std::cout << "fusion (kernels per expression):\n";
  Tensor x = randn({512, 512}), w = randn({512, 256}), b = randn({256}), c = randn({1, 512});
  std::printf("  %-38s %lld\n", "(x*2+1).relu().exp()",
              static_cast<long long>(kernels_in((x * 2 + 1).relu().exp())));
  std::printf("  %-38s %lld\n", "x.sum(1) + x.max(1)",
              static_cast<long long>(kernels_in(x.sum(1) + x.max(1))));
  std::printf("  %-38s %lld\n", "relu(x.matmul(w) + b)",
              static_cast<long long>(kernels_in((x.matmul(w) + b).relu())));
  std::printf("  %-38s %lld\n", "x*x + tanh(c)  (c broadcast over rows)",
              static_cast<long long>(kernels_in(x * x + c.tanh())));
  std::printf("  %-38s %lld\n\n", "x.softmax(1)", static_cast<long long>(kernels_in(x.softmax(1))));

  // a bandwidth-bound kernel on all cores: out = a*b + tanh(c), c broadcast over rows
  int64_t n = 2048;
  Tensor A = rand({n, n}).realize(), B = rand({n, n}).realize(), C = rand({1, n}).realize();
  (A * B + C.tanh()).realize();  // compile once
  auto t0 = std::chrono::steady_clock::now();
  int reps = 10;
  for (int i = 0; i < reps; i++) (A * B + C.tanh()).realize();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  double gb = 3.0 * n * n * 4 / 1e9;
  std::printf("a*b + tanh(c) at %lldx%lld f32: %.3f ms, %.2f GB/s on %s\n", static_cast<long long>(n),
              static_cast<long long>(n), s * 1e3, gb / s, "the CPU");

  float check = (A * B + C.tanh()).sum().item<float>();
  std::printf("checksum %.3f\n", check);
  return std::isfinite(check) ? 0 : 1;
} catch (const Error& e) {  // a bad KILN_* setting, no C compiler, ...
  std::cerr << e.what() << "\n";
  return 1;
}
