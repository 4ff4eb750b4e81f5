// CUDA discovery: a machine without a driver gets a reason naming what is missing; a machine with a
// GPU lists its devices (run on the GPU machine; skipped elsewhere with a one-line reason).
#include <gtest/gtest.h>

#include "runtime/cuda/driver.h"

using namespace kiln::runtime::cuda;

TEST(CudaDriver, ProbeGivesDevicesOrAReason) {
  const Availability& a = availability();
  EXPECT_EQ(&a, &availability());  // probed once
  if (!a.available) {
    EXPECT_FALSE(a.reason.empty());
    EXPECT_NE(describe(a).find("not usable: "), std::string::npos);
    GTEST_SKIP() << "no usable CUDA GPU: " << a.reason;
  }
  ASSERT_FALSE(a.devices.empty());
  for (auto& d : a.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.major, 5);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.memory_bytes, size_t{1} << 30);
  }
  EXPECT_GT(a.driver_version, 0);
  EXPECT_GT(a.nvrtc_major, 0);
  EXPECT_NE(describe(a).find("cuda:0 "), std::string::npos);
}
