// What the backends whose work runs in the calling thread share (the CPU, the ref interpreter): no
// queue to wait for, and the wall clock as their timer.
#pragma once
#include <chrono>
#include <memory>

#include "runtime/backend.h"

namespace kiln::runtime {

class HostBackend : public Backend {
 public:
  void synchronize() override {}  // work is done when its call returns
  std::unique_ptr<Timer> timer() override { return std::make_unique<WallTimer>(); }

 private:
  class WallTimer : public Timer {
   public:
    void start() override { t0_ = std::chrono::steady_clock::now(); }
    double stop_ms() override {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    }

   private:
    std::chrono::steady_clock::time_point t0_;
  };
};

}  // namespace kiln::runtime
