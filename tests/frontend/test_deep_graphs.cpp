// Long lazy graphs: accumulating 10^6 times, freeing a 10^6-node chain, backward through 10^5 steps
// and realizing a deep graph built from IR nodes. Each runs on a thread with a 1 MB stack (`ulimit
// -s 1024`), which a walk recursing once per node would overflow.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "engine/realize.h"
#include "frontend/graph.h"
#include "helpers.h"
#include "ir/node.h"
#include "schedule/schedule.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
constexpr size_t kSmallStack = 1 << 20;
}

TEST(DeepGraphs, AccumulatingAMillionTimesThenItemIsExact) {
  run_with_stack(kSmallStack, [] {
    constexpr int kSteps = 1000000;
    Tensor x = full({}, 0.1f).realize();
    Tensor acc = zeros({});
    for (int i = 0; i < kSteps; i++) acc = acc + x;  // a loss summed for logging
    EXPECT_LE(acc.node()->depth.load(), frontend::kMaxLazyDepth);
    float want = 0;
    for (int i = 0; i < kSteps; i++) want = want + 0.1f;  // f32 adds in the same order
    EXPECT_EQ(acc.item<float>(), want);
  });
}

TEST(DeepGraphs, FreeingAMillionNodeChainDoesNotRecurse) {
  size_t before = ir::live_nodes();
  run_with_stack(kSmallStack, [] {
    ir::NodeRef one = ir::const_float(1, DType::F32);
    ir::NodeRef x = ir::make(ir::Op::BUFFER, DType::F32, {}, {}, {-7, Device::cpu().code()});
    for (int i = 0; i < 1000000; i++) x = ir::make(ir::Op::ADD, DType::F32, {}, {x, one});
    EXPECT_EQ(x->depth.load(), 1000000u);
    x.reset();  // the whole chain goes here
  });
  EXPECT_LE(ir::live_nodes(), before + 1);  // the constant may be alive elsewhere
}

TEST(DeepGraphs, AGraphBuiltFromNodesIsCutIntoKernelsOfBoundedDepth) {
  run_with_stack(kSmallStack, [] {
    constexpr int kSteps = 100000;
    Tensor x = full({3}, 0.5f).realize();
    ir::NodeRef n = x.node();
    ir::NodeRef c = ir::const_float(0.25, DType::F32, {3});
    for (int i = 0; i < kSteps; i++) n = ir::make(i % 2 ? ir::Op::ADD : ir::Op::MUL, DType::F32, {3}, {n, c});
    int64_t kernels = stats().kernels_run;
    engine::realize({n}, x.device());
    EXPECT_GE(stats().kernels_run - kernels, kSteps / static_cast<int64_t>(schedule::kMaxFusedDepth));
    float want = 0.5f;
    for (int i = 0; i < kSteps; i++) want = i % 2 ? want + 0.25f : want * 0.25f;
    EXPECT_TRUE(expect_values(Tensor(n), {want, want, want}));
  });
}

TEST(DeepGraphs, BackwardThroughAHundredThousandSteps) {
  run_with_stack(kSmallStack, [] {
    constexpr int kSteps = 100000;
    Tensor x = full({}, 1.0f).requires_grad_();
    Tensor acc = x;
    for (int i = 0; i < kSteps; i++) acc = acc * 0.5 + x;
    acc.backward();
    // the same f32 operations in the order kiln's kernels run them: the forward recurrence, and
    // x's gradient summed from the last step down (the k-th term is 0.5^k)
    float want = 1, grad = 0, term = 1;
    for (int i = 0; i < kSteps; i++) want = want * 0.5f + 1;
    for (int k = 0; k <= kSteps; k++) grad = grad + term, term = term * 0.5f;
    EXPECT_EQ(acc.item<float>(), want);
    EXPECT_EQ(x.grad().item<float>(), grad);
  });
}

TEST(DeepGraphs, TheLazyLimitNeverStoresABroadcast) {
  // the node that crosses the limit reads a broadcast (a matmul's product before its sum): its sum,
  // one deeper, is realized instead, not the (4, 1000) product
  Tensor acc = full({4}, 1.0f).realize();
  while (acc.node()->depth.load() + 3 <= frontend::kMaxLazyDepth) acc = acc * 1.0001;
  Tensor wide = full({4, 1000}, 2.0f).realize();
  Tensor prod = acc.unsqueeze(1) * wide;
  ASSERT_GT(prod.node()->depth.load(), frontend::kMaxLazyDepth);
  EXPECT_EQ(prod.node()->buffer, nullptr);
  Tensor s = prod.sum(1);
  EXPECT_NE(s.node()->buffer, nullptr);
  EXPECT_TRUE(expect_matches_reference(s, 1e-4, 1e-5));
}
