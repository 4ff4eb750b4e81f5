// The timer of a backend whose work runs when it is called (the CPU, the ref interpreter): the wall
// clock between start() and stop_ms().
#pragma once
#include <chrono>

#include "runtime/backend.h"

namespace kiln::runtime {

class WallTimer : public Timer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  double stop_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace kiln::runtime
