// The CUDA renderer's thread mappings, checked on the rendered source (runs without a GPU).
#include <gtest/gtest.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "kiln/kiln.h"
#include "schedule/schedule.h"

using namespace kiln;

namespace {

std::vector<codegen::Lowered> lower_all(const Tensor& t) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  std::vector<codegen::Lowered> out;
  for (auto& k : sched.kernels) out.push_back(codegen::lower(k.ast, codegen::Target::CUDA));
  return out;
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(RenderCuda, ElementwiseIsAGridStrideLoop) {
  Tensor a = kiln::testing::random_tensor({64, 100}, DType::F32, -1, 1, 1);
  Tensor c = kiln::testing::random_tensor({1, 100}, DType::F32, -1, 1, 2);
  auto ks = lower_all(a * a + c.tanh());
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::Elementwise);
  EXPECT_EQ(k.launch.work, 6400);
  EXPECT_TRUE(has(k.source, "extern \"C\" __global__")) << k.source;
  EXPECT_TRUE(has(k.source, "t += (int64_t)gridDim.x * blockDim.x")) << k.source;
  EXPECT_FALSE(has(k.source, "__syncthreads")) << k.source;
}

TEST(RenderCuda, LongRowsReduceOverABlock) {
  Tensor x = kiln::testing::random_tensor({32, 768}, DType::F32, -1, 1, 3);
  auto ks = lower_all(x.sum(1));
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::BlockReduce);
  EXPECT_EQ(k.launch.work, 32);
  EXPECT_TRUE(has(k.source, "+= blockDim.x")) << k.source;
  EXPECT_TRUE(has(k.source, "kiln_block_reduce(")) << k.source;
  EXPECT_TRUE(has(k.source, "if (threadIdx.x == 0)")) << k.source;
}

TEST(RenderCuda, ShortRowsKeepOneThreadPerOutput) {
  Tensor x = kiln::testing::random_tensor({1000, 8}, DType::F32, -1, 1, 4);
  auto ks = lower_all(x.max(1));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].launch.kind, codegen::CudaLaunch::Kind::Elementwise);
  EXPECT_FALSE(has(ks[0].source, "kiln_block_reduce(")) << ks[0].source;
}

TEST(RenderCuda, HalvesAndBitcastsUseDeviceConversions) {
  Tensor h = kiln::testing::random_tensor({300}, DType::BF16, -1, 1, 5);
  auto ks = lower_all((h * 2).to(DType::F16));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_TRUE(has(ks[0].source, "kiln_bf2f(")) << ks[0].source;
  EXPECT_TRUE(has(ks[0].source, "kiln_f2h(")) << ks[0].source;
}

}  // namespace

namespace {
TEST(RenderCuda, FewOutputsWithLongReducesSplitOverBlocks) {
  Tensor x = kiln::testing::random_tensor({4, 1 << 20}, DType::F32, -1, 1, 6);
  auto ks = lower_all(x.sum(1));
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::BlockReduce);
  EXPECT_GT(k.launch.split, 1);
  EXPECT_EQ(k.launch.scratch_bytes, k.launch.counters_offset + 4 * 4);
  EXPECT_TRUE(has(k.source, "kiln_scratch")) << k.source;
  EXPECT_TRUE(has(k.source, "atomicAdd(")) << k.source;
}
}  // namespace

namespace {
TEST(RenderCuda, ColumnSumsKeepLoadsCoalesced) {
  // a sum over rows (a bias gradient): one thread per column, rows cut into chunks over gridDim.y
  Tensor x = kiln::testing::random_tensor({4096, 768}, DType::F32, -1, 1, 7);
  auto ks = lower_all(x.sum(0));
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::ColumnReduce) << k.source;
  EXPECT_GT(k.launch.split, 1);
  EXPECT_TRUE(has(k.source, "blockIdx.y")) << k.source;
  EXPECT_TRUE(has(k.source, "if (kiln_live) data0[")) << k.source;
}
}  // namespace
