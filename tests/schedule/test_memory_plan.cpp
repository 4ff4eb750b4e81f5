// Memory planning: arena placement properties, and which kernel outputs a realize plans.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <random>

#include "helpers.h"
#include "schedule/memory_plan.h"
#include "schedule/schedule.h"

using namespace kiln;
using namespace kiln::schedule;

namespace {
size_t aligned(size_t b) {
  return (std::max<size_t>(b, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

void expect_valid(const std::vector<LiveRange>& r, const ArenaPlan& p) {
  ASSERT_EQ(p.offsets.size(), r.size());
  size_t total = 0;
  for (size_t i = 0; i < r.size(); i++) {
    total += aligned(r[i].bytes);
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0u);
    EXPECT_LE(p.offsets[i] + aligned(r[i].bytes), p.peak);
    for (size_t j = i + 1; j < r.size(); j++) {
      bool live_together = r[i].first <= r[j].last && r[j].first <= r[i].last;
      bool disjoint = p.offsets[i] + r[i].bytes <= p.offsets[j] || p.offsets[j] + r[j].bytes <= p.offsets[i];
      if (live_together) {
        EXPECT_TRUE(disjoint) << "ranges " << i << " and " << j << " share memory";
      }
    }
  }
  EXPECT_EQ(p.total, total);
  EXPECT_LE(p.peak, p.total);
}
}  // namespace

TEST(MemoryPlan, RandomRangesNeverShareMemoryWhileLive) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; trial++) {
    std::vector<LiveRange> r(rng() % 24);
    for (auto& x : r) {
      x.first = static_cast<int64_t>(rng() % 20);
      x.last = x.first + static_cast<int64_t>(rng() % 6);
      x.bytes = 1 + rng() % 5000;
    }
    expect_valid(r, plan_arena(r));
  }
}

TEST(MemoryPlan, AChainReusesMemory) {
  // each value is read only by the next kernel: two slots are enough
  std::vector<LiveRange> r = {{0, 1, 4096}, {1, 2, 4096}, {2, 3, 4096}, {3, 4, 4096}, {4, 5, 4096}};
  ArenaPlan p = plan_arena(r);
  expect_valid(r, p);
  EXPECT_EQ(p.peak, 2 * 4096u);
  EXPECT_EQ(p.total, 5 * 4096u);
}

TEST(MemoryPlan, BestFitTakesTheSmallestGap) {
  // a big and a small value leave gaps; a later small one goes into the small gap
  std::vector<LiveRange> r = {{0, 9, 1024}, {0, 0, 512}, {1, 9, 256}, {2, 9, 256}};
  ArenaPlan p = plan_arena(r);
  expect_valid(r, p);
  EXPECT_EQ(p.peak, 1024u + 512u);
}

TEST(MemoryPlan, ScheduleIntermediatesArePlannedRootsAreNot) {
  Tensor x = kiln::testing::random_tensor({64, 64}, DType::F32, -1, 1, 1);
  Tensor y = x.matmul(x).relu().matmul(x).exp().matmul(x).sum();
  Schedule s = make_schedule({y.node()});
  ASSERT_GE(s.kernels.size(), 3u);
  MemoryPlan p = plan_memory(s, {y.node().get()});
  EXPECT_GT(p.planned, 0u);
  EXPECT_LE(p.arena_bytes, p.no_reuse_bytes);
  for (size_t k = 0; k < s.kernels.size(); k++)
    for (size_t o = 0; o < s.kernels[k].outputs.size(); o++)
      EXPECT_EQ(p.offset[k][o] < 0, s.kernels[k].outputs[o] == y.node());
}

TEST(MemoryPlan, RealizeReusesTheArenaInAChain) {
  Tensor x = kiln::testing::random_tensor({128, 128}, DType::F32, -1, 1, 2);
  Tensor h = x;
  for (int i = 0; i < 5; i++) h = (h.matmul(x) * 0.05).exp();  // each step is its own kernel
  Stats before = stats();
  std::vector<float> got = h.sum().to_vector<float>();
  int64_t peak = stats().arena_bytes - before.arena_bytes;
  int64_t no_reuse = stats().arena_no_reuse_bytes - before.arena_no_reuse_bytes;
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, no_reuse);
  EXPECT_TRUE(std::isfinite(got[0]));
}

TEST(MemoryPlan, AnIntermediateHeldByATensorKeepsItsBuffer) {
  Tensor x = kiln::testing::random_tensor({64, 64}, DType::F32, -1, 1, 3);
  Tensor h = (x.matmul(x) * 0.1).exp();  // realized inside the next schedule (read by a matmul)
  Tensor out = h.matmul(x).sum();
  std::shared_ptr<const ir::Node> h_graph = h.node();
  out.realize();
  // h is not a root, but its Tensor may read it later: it was not put in the arena
  int64_t kernels = stats().kernels_run;
  kiln::testing::expect_matches_reference(h, h_graph, 1e-4, 1e-5);
  EXPECT_EQ(stats().kernels_run, kernels) << "h was computed again: its buffer had been planned";
}

TEST(MemoryPlan, AnIntermediateWithoutHoldersIsPlannedAndStillCorrect) {
  Tensor x = kiln::testing::random_tensor({64, 64}, DType::F32, -1, 1, 4);
  Tensor out = ((x.matmul(x) * 0.1).exp().matmul(x) * 0.1).exp().matmul(x).sum();
  std::shared_ptr<const ir::Node> graph = out.node();
  Stats before = stats();
  kiln::testing::expect_matches_reference(out, graph, 1e-4, 1e-4);
  EXPECT_GT(stats().arena_bytes, before.arena_bytes);
}

// A training step's loss, read after the optimizer step: the step computed it with the gradients,
// so reading it runs no kernel, where it used to compute the whole forward again.
TEST(MemoryPlan, ALossReadAfterTheOptimizerStepComputesOnlyItsLastKernels) {
  manual_seed(0);
  nn::GPT model(nn::GPTConfig{.vocab_size = 96, .block_size = 32, .n_layer = 1, .n_head = 2, .n_embd = 32});
  optim::AdamW opt(model->parameters(), {.lr = 3e-4});
  Tensor idx = randint(0, 96, {2, 16}).realize(), tgt = randint(0, 96, {2, 16}).realize();
  for (int step = 0; step < 2; step++) {
    Tensor loss = model->forward(idx, tgt).second;
    std::shared_ptr<const ir::Node> graph = loss.node();
    opt.zero_grad();
    loss.backward();
    opt.step();
    const int64_t kernels = stats().kernels_run;
    loss.realize();
    EXPECT_EQ(stats().kernels_run - kernels, 0) << "the forward was computed again for the loss";
    kiln::testing::expect_matches_reference(loss, graph, 1e-4, 1e-5);  // with the old parameters
  }
}
