// CPU register tiles (upcast_reduce_output): matmul-shaped reduces in up to 16 x 32 tiles (AVX-512), checked
// against the reference interpreter on shapes the tiles divide, and on shapes they do not.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/cpu_opts.h"
#include "codegen/opt.h"
#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::opts_of;
using kiln::testing::random_tensor;

namespace {

// The last kernel of t's schedule, lowered for a CPU with AVX-512's 64-byte vectors (or others).
codegen::Lowered lower_last(const Tensor& t, int threads = 1, int vector_bytes = 64) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  return codegen::lower(sched.kernels.back().ast, codegen::Target::CPU,
                        {.vector_bytes = vector_bytes, .cores = threads});
}

Tensor rand(const Shape& s, uint64_t seed) { return kiln::testing::rand_f32(s, seed); }

}  // namespace

// A matmul whose sizes the widest tile divides is computed in 16 x 32 tiles, its lanes unrolled
// by their count, so the compiler keeps the 512 accumulators in vector registers.
TEST(RegisterTiles, MatmulTakesTheWidestTile) {
  Tensor c = rand({64, 48}, 1).matmul(rand({48, 96}, 2));
  codegen::Lowered low = lower_last(c);
  EXPECT_EQ(opts_of(low), "UPCAST 32 UPCAST 16 ");
  EXPECT_NE(low.source.find("#pragma GCC unroll 16"), std::string::npos) << low.source;
  EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5));
}

// The lanes are unrolled inside the reduce loop only: the stores and an epilogue after it stay one
// loop (unrolled 16 times, a gelu backward's epilogue was code enough to miss the instruction cache).
TEST(RegisterTiles, OnlyTheReduceUnrollsItsLanes) {
  Tensor x = rand({64, 48}, 21);
  Tensor y = (x.matmul(rand({48, 96}, 22)) + rand({96}, 23)).gelu(true);
  codegen::Lowered low = lower_last(y);
  ASSERT_EQ(opts_of(low), "UPCAST 32 UPCAST 16 ");
  size_t unrolls = 0;
  for (size_t at = 0; (at = low.source.find("#pragma GCC unroll", at)) != std::string::npos; at++) unrolls++;
  EXPECT_EQ(unrolls, 1u) << low.source;
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
}

// The tile follows the vector registers the kernels are built with: 16 x 32 with AVX-512, 8 x 16
// with AVX2 (16 x 32 spills its 16 registers), 8 x 8 with 16-byte vectors.
TEST(RegisterTiles, TileFollowsTheVectorRegisters) {
  Tensor c = rand({64, 48}, 1).matmul(rand({48, 96}, 2));
  EXPECT_EQ(opts_of(lower_last(c, 1, 64)), "UPCAST 32 UPCAST 16 ");
  EXPECT_EQ(opts_of(lower_last(c, 1, 32)), "UPCAST 16 UPCAST 8 ");
  EXPECT_EQ(opts_of(lower_last(c, 1, 16)), "UPCAST 8 UPCAST 8 ");
  EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5));  // with this machine's tile
}

// Sizes the widest tile does not divide take the widest that does (24 x 40: 8 x 8).
TEST(RegisterTiles, NarrowerTileWhereTheWidestDoesNotDivide) {
  Tensor c = rand({24, 20}, 3).matmul(rand({20, 40}, 4));
  EXPECT_EQ(opts_of(lower_last(c)), "UPCAST 8 UPCAST 8 ");
  EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5));
  // exactly one tile over each output loop
  Tensor d = rand({16, 9}, 5).matmul(rand({9, 32}, 6));
  EXPECT_EQ(opts_of(lower_last(d)), "UPCAST 32 UPCAST 16 ");
  EXPECT_TRUE(expect_matches_reference(d, 1e-5, 1e-5));
}

// Shapes no tile divides stay untiled, and are right.
TEST(RegisterTiles, ShapesNoTileDividesMatchTheReference) {
  for (auto [m, k, n] :
       std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {129, 65, 33}, {3, 70, 64}}) {
    Tensor c = rand({m, k}, 7).matmul(rand({k, n}, 8));
    EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5)) << m << "x" << k << "x" << n;
  }
}

// Operands as autograd passes them (transposed views), a sliced view, broadcasting over a batch, and
// an elementwise epilogue in the matmul's kernel.
TEST(RegisterTiles, ViewsBatchesAndEpiloguesMatchTheReference) {
  Tensor a = rand({96, 64}, 9), b = rand({64, 128}, 10);
  EXPECT_TRUE(expect_matches_reference(a.transpose(0, 1).matmul(rand({96, 32}, 11)), 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(a.matmul(rand({32, 64}, 12).transpose(0, 1)), 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(a.slice(1, 0, 48).matmul(b.slice(0, 16, 64)), 1e-5, 1e-5));
  Tensor batched = rand({3, 1, 32, 24}, 13).matmul(rand({1, 2, 24, 64}, 14));
  EXPECT_NE(opts_of(lower_last(batched)).find("UPCAST 32 UPCAST 16"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(batched, 1e-5, 1e-5));
  Tensor bias = rand({128}, 15);
  Tensor y = (a.matmul(b) + bias).relu() * 0.5;
  EXPECT_NE(opts_of(lower_last(y)).find("UPCAST 32 UPCAST 16"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
}

// The gradients of a linear layer (x^T dy reduces over rows, dy w over outputs) in tiles.
TEST(RegisterTiles, LinearGradientsMatchTheReference) {
  Tensor x = rand({48, 64}, 16), w = rand({32, 64}, 17), dy = rand({48, 32}, 18);
  Tensor y = x.matmul(w.transpose(0, 1));
  auto g = grad({y}, {x, w}, {dy});
  EXPECT_NE(opts_of(lower_last(g[1])).find("UPCAST"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(g[0], 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(g[1], 1e-5, 1e-5));
}

// Columns read as two loops (heads merged back into a row: c / 8, c % 8): the tile's rows are the
// output's rows, not the heads (whose lanes would each load their own columns), so each loaded
// column vector serves 16 rows.
TEST(RegisterTiles, RowsOfTheTileAreTheOutputRowsNotSplitColumns) {
  Tensor att = rand({2, 4, 16, 8}, 19), dy = rand({32, 48}, 20);
  Tensor merged = att.transpose(1, 2).reshape({32, 32});
  Tensor dw = dy.transpose(0, 1).matmul(merged);
  std::string opts = opts_of(lower_last(dw));
  EXPECT_NE(opts.find("SPLIT 4x8"), std::string::npos) << opts;
  EXPECT_NE(opts.find("UPCAST 8 UPCAST 16"), std::string::npos) << opts;
  EXPECT_TRUE(expect_matches_reference(dw, 1e-5, 1e-5));
}
