// The CUDA renderer's thread mappings, checked on the rendered source (runs without a GPU).
#include <gtest/gtest.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "kiln/kiln.h"
#include "schedule/schedule.h"

using namespace kiln;

namespace {

// limits: a device's (the defaults: 48 KB of shared memory a block, what every GPU has)
std::vector<codegen::Lowered> lower_all(const Tensor& t, const codegen::DeviceLimits& limits = {}) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  std::vector<codegen::Lowered> out;
  for (auto& k : sched.kernels) out.push_back(codegen::lower(k.ast, codegen::Target::CUDA, limits));
  return out;
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

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

TEST(RenderCuda, ContiguousAccessesAreVectorsOfFourLanes) {
  Tensor a = kiln::testing::random_tensor({64, 100}, DType::F32, -1, 1, 1);
  Tensor b = kiln::testing::random_tensor({64, 100}, DType::F32, -1, 1, 2);
  Tensor c = kiln::testing::random_tensor({1, 100}, DType::F32, -1, 1, 3);
  auto k = lower_all(a * b + c.tanh())[0];
  EXPECT_EQ(k.launch.lanes, 4);
  // a, b and the broadcast row c: one 16-byte load each; the output: one 16-byte store
  EXPECT_EQ(count(k.source, "const kiln_v4<float> vec"), 3) << k.source;
  EXPECT_EQ(count(k.source, "*(kiln_v4<float>*)(data0 + "), 1) << k.source;
  EXPECT_TRUE(has(k.source, "t += (int64_t)gridDim.x * blockDim.x * 4")) << k.source;
  EXPECT_TRUE(has(k.source, "tanh") || has(k.source, "exp")) << k.source;
  // a transposed operand moves by a row per lane: four loads, the store stays one vector
  auto tr = lower_all(kiln::testing::random_tensor({100, 64}, DType::F32, -1, 1, 4).t() * b)[0];
  EXPECT_EQ(tr.launch.lanes, 4);
  EXPECT_EQ(count(tr.source, "const kiln_v4<float> vec"), 1) << tr.source;
  EXPECT_EQ(count(tr.source, "*(kiln_v4<float>*)(data0 + "), 1) << tr.source;
  // halves: 4 lanes of 2 bytes
  auto h = lower_all(a.to(DType::BF16) * 2.0)[0];
  EXPECT_TRUE(has(h.source, "kiln_v4<uint16_t>")) << h.source;
  // a row not a multiple of 4, or a view that starts off a multiple of 4, keeps scalar accesses
  auto odd = lower_all(a.slice(1, 0, 99) * 2.0)[0];
  EXPECT_EQ(odd.launch.lanes, 1);
  EXPECT_FALSE(has(odd.source, "kiln_v4")) << odd.source;
  auto off = lower_all(a.slice(1, 1, 97) * 2.0)[0];
  EXPECT_FALSE(has(off.source, "const kiln_v4")) << off.source;
  // a long row's loops (past the shared-memory budget): each thread takes 4 consecutive elements
  Tensor x = kiln::testing::random_tensor({16, 50304}, DType::F32, -1, 1, 5);
  auto r = lower_all(x - x.max(1, true))[0];
  EXPECT_EQ(r.launch.kind, codegen::CudaLaunch::Kind::BlockReduce);
  EXPECT_EQ(r.launch.lanes, 4);
  EXPECT_EQ(count(r.source, "threadIdx.x * 4"), 2) << r.source;
  EXPECT_EQ(count(r.source, "const kiln_v4<float> vec"), 2) << r.source;
  // a value the same in every lane (a reduce over an expanded dim) is still added once per lane
  Tensor e = kiln::testing::random_tensor({1, 17}, DType::F32, -1, 1, 6).expand({256, 17});
  auto er = lower_all(e.sum(0))[0];
  EXPECT_EQ(er.launch.lanes, 4);
  EXPECT_EQ(count(er.source, " = acc"), 4 + 1) << er.source;  // an add per lane, the block's combine
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

TEST(RenderCuda, RowsReadBySeveralLoopsStayInSharedMemory) {
  // x - x.sum(1): the sum's loop loads each row from memory and keeps it, the output loop reads it back
  Tensor x = kiln::testing::random_tensor({16, 8000}, DType::F32, -1, 1, 8);
  auto ks = lower_all(x - x.sum(1, true));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].launch.smem_bytes, 8000 * 4);
  // each loop takes 4 lanes: the row is loaded as vectors, kept and read back lane by lane
  EXPECT_EQ(count(ks[0].source, "kiln_smem + 0))["), 2 * 4) << ks[0].source;
  EXPECT_EQ(count(ks[0].source, "*)(data1 + "), 1) << ks[0].source;
  EXPECT_EQ(count(ks[0].source, "data1["), 0) << ks[0].source;
  // a row past the budget (the block's shared memory) is read from memory by each loop, by one
  // block of 1024 threads per SM at most, so that L2 keeps it between the loops
  Tensor y = kiln::testing::random_tensor({2, 100000}, DType::F32, -1, 1, 9);
  auto big = lower_all(y - y.sum(1, true));
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].launch.smem_bytes, 0);
  EXPECT_EQ(big[0].launch.reread_bytes, 400000);
  EXPECT_EQ(big[0].launch.block, 1024);
  EXPECT_FALSE(has(big[0].source, "kiln_smem")) << big[0].source;
  // with an H100's 227 KB a block, a 201 KB row (a GPT-2 vocabulary's logits) stays in shared memory
  Tensor z = kiln::testing::random_tensor({2, 50304}, DType::F32, -1, 1, 10);
  auto vocab = lower_all(z - z.sum(1, true), {.shared_per_block = 227 * 1024});
  EXPECT_EQ(vocab[0].launch.smem_bytes, 50304 * 4);
  EXPECT_EQ(vocab[0].launch.block, 1024);
  EXPECT_EQ(vocab[0].launch.reread_bytes, 0);
  // bf16 logits stay as they are stored (100 KB): two blocks of 512 threads fit an SM
  Tensor h = kiln::testing::random_tensor({2, 50304}, DType::BF16, -1, 1, 11);
  auto half = lower_all(h.to(DType::F32) - h.to(DType::F32).max(1, true), {.shared_per_block = 227 * 1024});
  EXPECT_EQ(half[0].launch.smem_bytes, 50304 * 2);
  EXPECT_EQ(half[0].launch.block, 512);
  EXPECT_TRUE(has(half[0].source, "kiln_bf2f(((uint16_t*)(kiln_smem + 0))[")) << half[0].source;
  // a row read by one loop only is not kept
  EXPECT_EQ(lower_all(x.sum(1))[0].launch.smem_bytes, 0);
}

TEST(RenderCuda, ShortRowsKeepOneThreadPerOutput) {
  Tensor x = kiln::testing::random_tensor({1000, 8}, DType::F32, -1, 1, 4);
  auto ks = lower_all(x.max(1));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].launch.kind, codegen::CudaLaunch::Kind::Elementwise);
  EXPECT_FALSE(has(ks[0].source, "kiln_block_reduce(")) << ks[0].source;
}

// A short contiguous reduce (a head's 64 values) is shared by a group of 16 threads, each loading 4
// values a step (one vector access) and adding them in the loop's order; the group's sums combine by
// warp shuffles and its first thread stores.
TEST(RenderCuda, ShortContiguousRowsShareAGroupOfThreads) {
  Tensor g = kiln::testing::random_tensor({2, 16, 3, 64}, DType::BF16, -1, 1, 5);
  Tensor o = kiln::testing::random_tensor({2, 16, 3, 64}, DType::BF16, -1, 1, 6);
  Tensor d = (g.permute({0, 2, 1, 3}).to(DType::F32) * o.permute({0, 2, 1, 3}).to(DType::F32)).sum(-1);
  auto ks = lower_all(d);
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::Elementwise);
  EXPECT_EQ(k.launch.lanes, 4);
  EXPECT_EQ(k.launch.step, 1);
  EXPECT_EQ(k.launch.group, 16);
  EXPECT_EQ(count(k.source, "*(const kiln_v4<uint16_t>*)"), 2) << k.source;
  EXPECT_TRUE(has(k.source, "= (threadIdx.x & 15) * 4;")) << k.source;
  EXPECT_TRUE(has(k.source, "+= 16 * 4) {")) << k.source;
  EXPECT_TRUE(has(k.source, "kiln_group_reduce<16>(")) << k.source;
  EXPECT_TRUE(has(k.source, "if (kiln_live && (threadIdx.x & 15) == 0)")) << k.source;
  EXPECT_EQ(count(k.source, "fmaf("), 4) << k.source;
  // 96 outputs, a multiple of a warp's two groups: the loop runs to 96
  EXPECT_TRUE(has(k.source, "kiln_t0 < 96LL;")) << k.source;
  // a reduce too short for 8 threads of 4 values keeps one thread an output
  Tensor s = kiln::testing::random_tensor({1000, 16}, DType::F32, -1, 1, 7);
  EXPECT_EQ(lower_all(s.sum(1))[0].launch.group, 1);
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
  // a sum over rows (a bias gradient): a warp's lanes take 32 columns, its 8 warps every 8th row,
  // rows cut into chunks over gridDim.y whose results the last block combines
  Tensor x = kiln::testing::random_tensor({4096, 768}, DType::F32, -1, 1, 7);
  auto ks = lower_all(x.sum(0));
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.launch.kind, codegen::CudaLaunch::Kind::ColumnReduce) << k.source;
  EXPECT_EQ(k.launch.columns, 32);
  EXPECT_GT(k.launch.split, 1);
  EXPECT_TRUE(has(k.source, "blockIdx.y")) << k.source;
  EXPECT_TRUE(has(k.source, "(threadIdx.x & 31)")) << k.source;
  EXPECT_TRUE(has(k.source, "+= 8)")) << k.source;                          // the warps' rows
  EXPECT_EQ(count(k.source, "__shared__ float kiln_rows"), 2) << k.source;  // the block's, then the chunks'
  EXPECT_TRUE(has(k.source, "if (kiln_live && threadIdx.x < 32) data0[")) << k.source;
  // many columns and few rows: one chunk, the block's warps combined, no partial results
  Tensor w = kiln::testing::random_tensor({200, 40000}, DType::F32, -1, 1, 8);
  auto kw = lower_all(w.sum(0))[0];
  EXPECT_EQ(kw.launch.kind, codegen::CudaLaunch::Kind::ColumnReduce) << kw.source;
  EXPECT_EQ(kw.launch.split, 1);
  EXPECT_EQ(kw.launch.scratch_bytes, 0);
  EXPECT_FALSE(has(kw.source, "kiln_scratch")) << kw.source;
  EXPECT_EQ(count(kw.source, "__shared__ float kiln_rows"), 1) << kw.source;
}
}  // namespace
