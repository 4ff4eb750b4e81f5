// Running out of memory is an error, not the end of the process: under a memory limit a tensor
// of many GB is a kiln::Error naming the bytes, and the process then computes as before (CPU, in a
// memory-limited child process); on a GPU, 10 TB is an error naming the bytes asked and free, and
// a small computation on it runs after.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "helpers.h"

namespace kiln::testing {
namespace {

// 16 GiB of f32 under a limit of 512 MiB more than the process has, then a read back as doubles
// that does not fit either.
TEST(MemoryLimit, TensorLargerThanMemoryIsAnErrorAndTheProcessGoesOn) {
  if (sanitized_build()) GTEST_SKIP() << "sanitizer allocators do not fail under RLIMIT_AS";
  int code = run_with_memory_limit(size_t{1} << 29, [] {
    const Device cpu = Device::cpu();
    Tensor big = zeros({int64_t{1} << 32}, {.device = cpu}) + 1.0f;
    std::string e = error_of([&] { big.realize(); });
    if (e.find("out of host memory allocating 17179869184 bytes") == std::string::npos) {
      std::fprintf(stderr, "got: %s\n", e.c_str());
      return 1;
    }
    // the same again (nothing half-made is left behind)
    if (error_of([&] { big.realize(); }) != e) return 2;
    {  // reading 256 MB of f32 back as 512 MB of doubles does not fit what is left either
      Tensor mid = ones({int64_t{1} << 26}, {.device = cpu}) * 3.0f;
      mid.realize();
      std::string r = error_of([&] { mid.to_vector<double>(); });
      if (r.find("to_vector") == std::string::npos ||
          r.find("out of host memory for 67108864 elements of 8 bytes") == std::string::npos) {
        std::fprintf(stderr, "got: %s\n", r.c_str());
        return 4;
      }
    }
    // then something small
    Tensor small = (arange(0.0, 1000.0, 1.0, DType::F32).to(cpu) * 2.0f).sum();
    return small.item<float>() == 999000.0f ? 0 : 3;
  });
  EXPECT_EQ(code, 0) << "1: wrong error; 2: another error the second time; 3: wrong sum; 4: wrong "
                        "to_vector error; 99: another exception; 134: aborted; 139: segfault";
}

using MemoryLimitGpu = GpuTest;

// 10 TB on a GPU: a kiln::Error naming the bytes asked and the device's free memory; the device then
// computes as before.
TEST_F(MemoryLimitGpu, TenTerabytesIsAnErrorAndTheDeviceGoesOn) {
  const int64_t bytes = int64_t{10} << 40;
  Tensor huge = zeros({bytes / 4}, {.device = gpu}) + 1.0f;
  std::string e = error_of([&] { huge.realize(); });
  EXPECT_EQ(e.rfind("kiln.cuda: out of device memory allocating 10995116277760 bytes on cuda:" +
                        std::to_string(gpu.index) + " (",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find(" free)"), std::string::npos) << e;
  Tensor small = (arange(10, {.dtype = DType::F32, .device = gpu}) * 2.0f).sum();
  EXPECT_EQ(small.item<float>(), 90.0f);
}

}  // namespace
}  // namespace kiln::testing
