// SWAP (order_output_loops): a reduce whose outermost output loop does not move a large operand
// that a later loop moves runs that later loop outermost; results against the reference interpreter.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/cpu_opts.h"
#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::opts_of;
using kiln::testing::random_tensor;

namespace {

codegen::Lowered lower_last(const Tensor& t) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  return codegen::lower(sched.kernels.back().ast, codegen::Target::CPU, {.vector_bytes = 64, .cores = 2});
}

}  // namespace

// A few rows through a large linear layer (decoding: x (3, 1, 256) @ w.T, w 2 MB): w's rows are
// the outer loop, each read once for the three rows, and the result is unchanged.
TEST(LoopOrder, FewRowsThroughALargeWeightReadItOnce) {
  Tensor x = random_tensor({3, 1, 256}, DType::F32, -1, 1, 1),
         w = random_tensor({2048, 256}, DType::F32, -1, 1, 2);
  Tensor y = x.matmul(w.t());
  EXPECT_NE(opts_of(lower_last(y)).find("SWAP 3x2048"), std::string::npos) << opts_of(lower_last(y));
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
}

// Operands of comparable size (a training matmul), or a weight under kSwapMinBytes, keep their order.
TEST(LoopOrder, ComparableOrSmallOperandsKeepTheirOrder) {
  Tensor a = random_tensor({512, 256}, DType::F32, -1, 1, 3),
         b = random_tensor({1024, 256}, DType::F32, -1, 1, 4);
  EXPECT_EQ(opts_of(lower_last(a.matmul(b.t()))).find("SWAP"), std::string::npos);
  Tensor x = random_tensor({3, 64}, DType::F32, -1, 1, 5), w = random_tensor({512, 64}, DType::F32, -1, 1, 6);
  EXPECT_EQ(opts_of(lower_last(x.matmul(w.t()))).find("SWAP"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(x.matmul(w.t()), 1e-5, 1e-5));
}
