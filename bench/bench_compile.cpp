// Compile speed: time to rewrite + schedule + lower (optimize, linearize, render C) without running
// the C compiler, per kernel, for typical graphs. Prints a table; never fails on time.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor mu = x.mean(-1, true);
  Tensor xc = x - mu;
  Tensor var = (xc * xc).mean(-1, true);
  return xc * (var + 1e-5).rsqrt() * w + b;
}
}  // namespace

int main() {
  Tensor x = randn({64, 256}), w = randn({256, 256}), b = randn({256}), g = randn({256});
  Tensor a = randn({2048, 2048}), c = randn({1, 2048});
  std::vector<std::pair<std::string, std::function<Tensor()>>> graphs = {
      {"eltwise a*b+tanh(c)", [&] { return a * a + c.tanh(); }},
      {"softmax", [&] { return x.softmax(1); }},
      {"layernorm fwd", [&] { return layernorm(x, g, b); }},
      {"relu(x@w+b)", [&] { return (x.matmul(w) + b).relu(); }},
      {"mlp 2 layers + softmax", [&] { return (x.matmul(w) + b).relu().matmul(w).softmax(1); }},
  };
  std::printf("%-26s %8s %14s %14s %14s\n", "graph", "kernels", "schedule ms", "lower ms/kern", "total ms");
  std::vector<double> all_per_kernel;
  for (auto& [name, make] : graphs) {
    std::vector<double> sched_t, lower_t, total_t;
    size_t nk = 0;
    for (int rep = 0; rep < 30; rep++) {
      Tensor t = make();  // a fresh graph each time (hash-consing reuses identical nodes)
      auto t0 = std::chrono::steady_clock::now();
      auto roots = ir::rewrite_graph({t.node()});
      auto s = schedule::make_schedule(roots);
      auto t1 = std::chrono::steady_clock::now();
      for (auto& k : s.kernels) codegen::lower(k.ast);
      auto t2 = std::chrono::steady_clock::now();
      nk = s.kernels.size();
      double sm = std::chrono::duration<double>(t1 - t0).count() * 1e3;
      double lm = std::chrono::duration<double>(t2 - t1).count() * 1e3;
      sched_t.push_back(sm);
      lower_t.push_back(lm / static_cast<double>(nk));
      total_t.push_back(sm + lm);
      all_per_kernel.push_back((sm + lm) / static_cast<double>(nk));
    }
    std::printf("%-26s %8zu %14.3f %14.3f %14.3f\n", name.c_str(), nk, median(sched_t), median(lower_t),
                median(total_t));
  }
  std::printf("median per kernel (schedule + lower + render): %.3f ms (target < 1 ms)\n",
              median(all_per_kernel));
  return 0;
}
