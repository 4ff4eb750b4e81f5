// Shared benchmark helpers: medians of repeated timings and JSON result lines.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace kiln::bench {

// Median wall time in ms of `reps` calls of f after `warmup` calls.
inline double median_ms(const std::function<void()>& f, int reps = 15, int warmup = 3) {
  for (int i = 0; i < warmup; i++) f();
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace kiln::bench
