// kiln::DeviceTimer: the wall clock around work on the CPU, device events around queued work on a
// GPU (docs/tile.md times tile kernels with it).
#include <cmath>
#include <thread>

#include "helpers.h"

namespace kiln::testing {
namespace {

TEST(DeviceTimer, TimesWorkOnTheCpu) {
  DeviceTimer t(Device::cpu());
  t.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double ms = t.stop_ms();
  EXPECT_GE(ms, 20.0);
  t.start();  // again
  (randn({64, 64}).matmul(randn({64, 64}))).realize();
  EXPECT_GE(t.stop_ms(), 0.0);
  EXPECT_EQ(error_of([&] { t.stop_ms(); }), "kiln: DeviceTimer::stop_ms on cpu: start() was not called");
}

class DeviceTimerGpu : public GpuTest {};

// Queued kernels are timed on the device; the result is read back afterwards as usual.
TEST_F(DeviceTimerGpu, TimesQueuedWorkOnTheGpu) {
  Tensor x = randn({4096, 4096}).to(gpu).realize();
  synchronize(gpu);
  DeviceTimer t(gpu);
  t.start();
  double empty = t.stop_ms();
  t.start();
  Tensor y = (x * 2 + 1).sum().realize();
  double busy = t.stop_ms();
  EXPECT_GE(empty, 0.0);
  EXPECT_GT(busy, 0.0);
  EXPECT_TRUE(std::isfinite(y.to(Device::cpu()).item<float>()));
}

}  // namespace
}  // namespace kiln::testing
