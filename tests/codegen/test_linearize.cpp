// The linearizer on graphs with much sharing: walks visit each shared node once.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;

// tanh reads its input several times: twelve nested are a DAG of a few hundred nodes but of
// billions of paths, which hoisting values out of inner loops once walked one by one
TEST(Linearize, DeeplySharedChainsLinearizeQuickly) {
  Tensor x = random_tensor({3, 2, 7}, DType::F32, -2, 2, 1), s = random_tensor({2, 1}, DType::F32, -2, 2, 2);
  Tensor t = x / (s * s + 0.5);
  for (int i = 0; i < 12; i++) t = t.tanh();
  EXPECT_TRUE(expect_matches_reference(t / t.sigmoid(), 1e-5, 1e-6));
}

// Reduces over one loop where some move with the upcast lanes and one does not (merged into one
// loop nest): the one that does not keeps a plain accumulator (it was read by lane outside the lane
// loop, which did not compile)
TEST(Linearize, ReduceThatDoesNotMoveWithTheLanesKeepsItsOwnAccumulator) {
  Tensor t0 = tensor({1.94415641f, -0.959059834f, 1.83765209f, 0.243291274f, -1.82262838f}, {5});
  Tensor t2 = (t0 - 0.5) * (t0 - 0.5);
  Tensor t3 = t2.max(std::vector<int64_t>{}, true);
  Tensor t6 = cat({t2, t3}, 0);
  Tensor t7 = cat({t6, t6}, 0);
  EXPECT_TRUE(expect_matches_reference(t7 / (t3.abs() + 0.5), 1e-6, 1e-7));
  Tensor s = random_tensor({5}, DType::F32, -1, 1, 3);
  EXPECT_TRUE(expect_matches_reference(cat({s, s.sum({0}, true)}, 0) / (s.sum({0}, true) + 9.0), 1e-6, 1e-7));
}

// A reduce over an empty range is its identity, and nothing of its body is emitted: a load hoisted
// out of the loop that never runs read element 0 of an empty buffer (the ref device's bounds check
// found it in var, norm and einsum over empty dims)
TEST(Linearize, ReduceOverAnEmptyRangeLoadsNothing) {
  Tensor x = random_tensor({3, 0}, DType::F32, -1, 1, 4), c = random_tensor({1}, DType::F32, -1, 1, 5);
  Tensor s = (x * c).sum(1);  // c's load does not move with the reduce loop: it was hoisted
  auto sched = schedule::make_schedule(ir::rewrite_graph({s.node()}));
  ASSERT_EQ(sched.kernels.size(), 1u);
  for (const codegen::Inst& in : codegen::lower(sched.kernels[0].ast).program.insts)
    EXPECT_NE(in.op, ir::Op::LOAD) << codegen::to_string(codegen::lower(sched.kernels[0].ast).program);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

// A long matmul in register tiles sums each output in chunks: the sums come first, once per lane,
// not again inside each lane of the stores (which did the whole product 32 times).
TEST(Linearize, ChunkedSumsInRegisterTilesAreComputedOnce) {
  Tensor a = random_tensor({8, 40000}, DType::F32, -1, 1, 1),
         b = random_tensor({40000, 32}, DType::F32, -1, 1, 2);
  Tensor c = a.matmul(b);
  auto sched = schedule::make_schedule(ir::rewrite_graph({c.node()}));
  const schedule::Kernel& k = sched.kernels.back();
  codegen::Lowered low = codegen::lower(k.ast, codegen::Target::CPU, {});
  bool chunked = false, upcast = false;
  for (auto& o : low.opts) {
    chunked |= o.rfind("CHUNK_SUM", 0) == 0;
    upcast |= o.rfind("UPCAST", 0) == 0;
  }
  ASSERT_TRUE(chunked && upcast) << low.program.name;
  EXPECT_LT(low.program.flops, 4.0 * 8 * 32 * 40000)
      << low.program.name << ": about 2 m n k, not 32 times it";
  EXPECT_TRUE(expect_matches_reference(c, 1e-4, 1e-4));
}
