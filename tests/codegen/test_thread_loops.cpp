// THREAD_LOOPS (thread_outer_loops): a short outermost output loop merged with the next, so the CPU's
// threads split both; results against the reference interpreter.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;

namespace {

codegen::Lowered lower_last(const Tensor& t, int threads) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  // AVX-512's tiles (16 x 32), as the counts below assume
  return codegen::lower(sched.kernels.back().ast, codegen::Target::CPU,
                        {.vector_bytes = 64, .cores = threads});
}

bool has_opt(const codegen::Lowered& low, const std::string& prefix) {
  for (auto& o : low.opts)
    if (o.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

// A batch of 2 (m tiles 2 x 32 rows) on 4 threads: the batch loop merges with the m tiles, then with
// the n tiles, until the outer loop has 4 steps a thread.
TEST(ThreadLoops, ShortBatchLoopMergesWithTheTileLoops) {
  Tensor c = random_tensor({2, 32, 24}, DType::F32, -1, 1, 1)
                 .matmul(random_tensor({2, 24, 64}, DType::F32, -1, 1, 2));
  codegen::Lowered one = lower_last(c, 1), four = lower_last(c, 4);
  EXPECT_FALSE(has_opt(one, "THREAD_LOOPS"));
  EXPECT_EQ(one.program.outer_size, 2);
  ASSERT_TRUE(has_opt(four, "THREAD_LOOPS"));
  EXPECT_EQ(four.program.outer_size, 2 * 2 * 2);  // batch x m tiles x n tiles
  EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5));
}

// Attention-shaped (batch 1, 2 heads, T 16, head size 8): batch x heads x query rows.
TEST(ThreadLoops, HeadsAndRowsShareTheThreads) {
  Tensor q = random_tensor({1, 2, 16, 8}, DType::F32, -1, 1, 3),
         k = random_tensor({1, 2, 16, 8}, DType::F32, -1, 1, 4);
  Tensor s = q.matmul(k.transpose(2, 3)).softmax(-1);
  EXPECT_TRUE(expect_matches_reference(s, 1e-5, 1e-6));
  EXPECT_TRUE(
      expect_matches_reference(s.matmul(random_tensor({1, 2, 16, 8}, DType::F32, -1, 1, 5)), 1e-5, 1e-6));
}

// A row's reduce broadcast back over the row is computed once per row (linearize hoists it out of
// the column loop): the row loop is not merged with the column loop, which would compute it once
// per element.
TEST(ThreadLoops, RowReducesKeepTheirRowLoop) {
  Tensor x = random_tensor({2, 3, 64}, DType::F32, -1, 1, 6);
  Tensor y = x - x.max(std::vector<int64_t>{2}, true);
  codegen::Lowered low = lower_last(y, 8);
  EXPECT_FALSE(has_opt(low, "THREAD_LOOPS")) << low.program.name;
  EXPECT_EQ(low.program.outer_size, 6);
  EXPECT_TRUE(expect_matches_reference(y, 1e-6, 1e-6));
}

// Odd sizes and broadcast batches, run on the CPU backend's threads: merged where the batch is short.
TEST(ThreadLoops, OddShapesOnTheBackendsThreadsMatchTheReference) {
  Tensor a = random_tensor({3, 7, 13}, DType::F32, -1, 1, 7),
         b = random_tensor({3, 13, 5}, DType::F32, -1, 1, 8);
  Tensor c = a.matmul(b);
  if (runtime::num_threads() >= 2 && default_device() == Device::cpu()) {  // (KILN_DEVICE=cuda: no THREAD)
    EXPECT_NE(kiln::testing::kernel_opts(c).find("THREAD_LOOPS 3x7"), std::string::npos);
  }
  EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5));
  Tensor d = random_tensor({2, 1, 1, 1}, DType::F32, -1, 1, 9)
                 .matmul(random_tensor({1, 3, 1, 1}, DType::F32, -1, 1, 10));
  EXPECT_TRUE(expect_matches_reference(d, 1e-6, 1e-6));
  Tensor e = random_tensor({1, 2, 65, 33}, DType::F32, -1, 1, 11)
                 .matmul(random_tensor({2, 1, 33, 129}, DType::F32, -1, 1, 12));
  EXPECT_TRUE(expect_matches_reference(e, 1e-5, 1e-5));
}
