// Loop shapes the lowering picks: adjacent reduce loops collapsed into one, and loops that indices
// divide split in two (codegen/opt.h). Values against the float64 reference, the opts by name.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "helpers.h"

using namespace kiln;
using kiln::testing::cuda_kernel_opts;
using kiln::testing::expect_matches_reference;
using kiln::testing::kernel_opts;
using kiln::testing::random_tensor;

TEST(CollapseReduce, SumOverBatchAndTimeIsOneLoop) {
  // a bias gradient: (16, 64, 48) summed over its first two dims is one reduce of 1024
  Tensor x = random_tensor({16, 64, 48}, DType::F32, -1, 1, 12);
  Tensor s = x.sum({0, 1});
  EXPECT_NE(kernel_opts(s).find("COLLAPSE_REDUCE 16x64"), std::string::npos) << kernel_opts(s);
  EXPECT_TRUE(expect_matches_reference(s, 1e-4, 1e-4));
  // through a permute the loops are not adjacent in memory: values still right
  Tensor p = x.permute({2, 0, 1}).sum({0, 2});
  EXPECT_TRUE(expect_matches_reference(p, 1e-4, 1e-4));
  Tensor sl = x.slice(1, 3, 60).sum({0, 1});  // a view: rows of 57 in strides of 64
  EXPECT_TRUE(expect_matches_reference(sl, 1e-4, 1e-4));
}

// A sum over (batch, time) of an input broadcast over the batch (a position embedding added to
// each row): one loop only with a division and a modulo per element. The GPU collapses it anyway
// (one long loop is split over blocks); the CPU keeps the cheaper two loops.
TEST(CollapseReduce, TheGpuCollapsesALongSumThroughABroadcast) {
  Tensor x = random_tensor({16, 512, 48}, DType::F32, -1, 1, 16);
  Tensor pos = random_tensor({512, 48}, DType::F32, -1, 1, 17);
  Tensor s = (x * pos).sum({0, 1});
  EXPECT_NE(cuda_kernel_opts(s).find("COLLAPSE_REDUCE 16x512"), std::string::npos) << cuda_kernel_opts(s);
  if (default_device().is_cpu()) {
    EXPECT_EQ(kernel_opts(s).find("COLLAPSE_REDUCE"), std::string::npos) << kernel_opts(s);
  }
  EXPECT_TRUE(expect_matches_reference(s, 1e-4, 1e-4));
  Tensor y = random_tensor({2, 8, 48}, DType::F32, -1, 1, 18), p8 = pos.slice(0, 0, 8);
  Tensor few = (y * p8).sum({0, 1});  // a short sum: its two loops stay
  EXPECT_EQ(cuda_kernel_opts(few).find("COLLAPSE_REDUCE"), std::string::npos) << cuda_kernel_opts(few);
}

TEST(SplitLoops, HeadsMergedIntoARowAreReadAsTwoLoops) {
  // attention's output (B, H, T, hd) merged back to rows of H * hd for the output projection: the
  // matmul's reduce over the row reads k / hd and k % hd, so it runs as H loops of hd
  Tensor a = random_tensor({2, 4, 8, 16}, DType::F32, -1, 1, 13);
  Tensor rows = a.permute({0, 2, 1, 3}).reshape({2, 8, 64});
  Tensor w = random_tensor({64, 24}, DType::F32, -1, 1, 14);
  Tensor y = rows.matmul(w);
  EXPECT_NE(kernel_opts(y).find("SPLIT_REDUCE 4x16"), std::string::npos) << kernel_opts(y);
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
  // its weight gradient: the merged rows are the innermost output loop, split the same way
  Tensor g = random_tensor({2, 8, 24}, DType::F32, -1, 1, 15);
  Tensor gw = rows.reshape({16, 64}).transpose(0, 1).matmul(g.reshape({16, 24}));
  Tensor gw2 = g.reshape({16, 24}).transpose(0, 1).matmul(rows.reshape({16, 64}));
  EXPECT_NE(kernel_opts(gw2).find("SPLIT 4x16"), std::string::npos) << kernel_opts(gw2);
  EXPECT_TRUE(expect_matches_reference(gw, 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(gw2, 1e-5, 1e-5));
}
