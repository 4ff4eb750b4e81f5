// A realize whose launch fails partway: the kernels that never ran leave no buffer behind, so a later
// realize computes their outputs instead of reading memory nothing wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "engine/launch_observer.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {

// Fails the n-th launch it sees (1-based), as a device error would.
struct FailingLaunch : engine::LaunchObserver {
  int n, seen = 0;
  explicit FailingLaunch(int at) : n(at) {}
  void launched(const runtime::Launch&, const std::vector<std::shared_ptr<Buffer>>&,
                const std::vector<std::shared_ptr<Buffer>>&) override {
    if (++seen == n) throw Error("kiln.test: launch " + std::to_string(n) + " fails");
  }
};

}  // namespace

TEST(FailedRealize, KernelsThatNeverRanAreComputedLater) {
  Tensor x = arange(0.0, 12.0).reshape({3, 4}).realize();
  Tensor s = x.sum(1, true), y = (x - s).exp().sum(1);  // at least two kernels: s, then y
  FailingLaunch fail(2);
  engine::launch_observer() = &fail;
  EXPECT_THROW(realize({s, y}), Error);
  engine::launch_observer() = nullptr;
  EXPECT_GE(fail.seen, 2);
  std::vector<double> got = y.to(DType::F64).to_vector<double>();
  for (int64_t r = 0; r < 3; r++) {
    double want = 0;
    for (int64_t c = 0; c < 4; c++) want += std::exp(static_cast<double>(4 * r + c) - (16.0 * r + 6.0));
    EXPECT_NEAR(got[static_cast<size_t>(r)], want, 1e-6 * want) << "row " << r;
  }
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{6, 22, 38}));
}
