// Horizontal fusion on the GPU (skipped without one): a kernel of segments, each a grid-stride loop
// (laned where its size is a multiple of 4), gives the bits of one kernel per segment.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "helpers.h"
#include "hfuse_scope.h"

using namespace kiln;

namespace {

class CudaHorizontalFusion : public kiln::testing::GpuTest {};
using kiln::testing::with_hfuse;

}  // namespace

TEST_F(CudaHorizontalFusion, IndependentKernelsAreOneLaunchWithTheSameBits) {
  std::vector<Tensor> in;
  for (int64_t n : {2, 3, 4, 17, 64, 1023, 4096, 1 << 20, (1 << 20) + 3})
    in.push_back(kiln::testing::random_tensor({n}, DType::F32, -2, 2, static_cast<uint64_t>(n)).to(gpu));
  auto run = [&] {
    std::vector<Tensor> outs;
    for (auto& x : in) outs.push_back((x * 0.3 + 1).exp() / (x * x + 0.5).sqrt());
    int64_t before = stats().kernels_run;
    realize(outs);
    std::vector<std::vector<float>> v{{static_cast<float>(stats().kernels_run - before)}};
    for (auto& o : outs) v.push_back(o.to_vector<float>());
    return v;
  };
  auto fused = with_hfuse(true, run), apart = with_hfuse(false, run);
  EXPECT_EQ(fused[0][0], 1);
  EXPECT_EQ(apart[0][0], static_cast<float>(in.size()));
  for (size_t i = 1; i < fused.size(); i++) EXPECT_EQ(fused[i], apart[i]) << "output " << i - 1;
}

TEST_F(CudaHorizontalFusion, AdamWStepWithClippingMatchesOneKernelPerParameter) {
  auto train = [&](bool hfuse) {
    return with_hfuse(hfuse, [&] {
      std::vector<Tensor> ps;
      for (int64_t j = 0; j < 24; j++)
        ps.push_back(
            kiln::testing::random_tensor({j * 37 + 1, 9}, DType::F32, -1, 1, static_cast<uint64_t>(j))
                .to(gpu)
                .requires_grad_());
      optim::AdamW opt(ps, {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
      int64_t kernels = 0;
      for (int s = 0; s < 3; s++) {
        opt.zero_grad();
        Tensor loss = zeros({}, {.device = gpu});
        for (auto& p : ps) loss = loss + (p * p).sin().sum();
        loss.backward();
        optim::clip_grad_norm_(ps, 0.5);
        int64_t before = stats().kernels_run;
        opt.step();
        kernels = stats().kernels_run - before;
      }
      std::vector<std::vector<float>> v{{static_cast<float>(kernels)}};
      for (auto& p : ps) v.push_back(p.to_vector<float>());
      return v;
    });
  };
  auto fused = train(true), apart = train(false);
  EXPECT_LT(fused[0][0] + 20, apart[0][0]);
  for (size_t i = 1; i < fused.size(); i++) EXPECT_EQ(fused[i], apart[i]) << "param " << i - 1;
}
