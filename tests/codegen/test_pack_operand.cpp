// PACK (pack_operand): a matmul operand read across the output's last loop with a long stride is
// copied into per-thread scratch first; results against the reference interpreter.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <random>

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

codegen::Lowered lower_last(const Tensor& t, bool scratch = true) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  return codegen::lower(sched.kernels.back().ast, codegen::Target::CPU,
                        {.vector_bytes = 64, .scratch = scratch});
}

Tensor rand(const Shape& s, uint64_t seed) { return kiln::testing::rand_f32(s, seed); }

}  // namespace

// x @ w.T (a linear layer): w is packed (k x n, n innermost), then tiled like x @ w; only where the
// backend provides scratch.
TEST(PackOperand, LinearWeightIsPackedAndTiled) {
  Tensor y = rand({48, 64}, 1).matmul(rand({96, 64}, 2).transpose(0, 1));
  codegen::Lowered low = lower_last(y);
  EXPECT_EQ(opts_of(low), "PACK 64x96 UPCAST 32 UPCAST 16 ");
  EXPECT_EQ(low.program.scratch_bytes, 64 * 96 * 4);
  EXPECT_NE(low.source.find("pidx"), std::string::npos) << low.source;
  EXPECT_EQ(opts_of(lower_last(y, false)).find("PACK"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
}

// Sizes the 16 x 16 copy blocks do not divide, a sliced weight, a bias and gelu in the same kernel,
// and bf16 operands (the scratch keeps the storage type).
TEST(PackOperand, UnevenSlicedFusedAndHalfMatchTheReference) {
  Tensor x = rand({40, 24}, 3), w = rand({36, 24}, 4);
  Tensor y = x.matmul(w.transpose(0, 1));
  EXPECT_NE(opts_of(lower_last(y)).find("PACK 24x36"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
  Tensor ws = rand({50, 40}, 5).slice(1, 8, 40).slice(0, 2, 50);
  Tensor z = (rand({32, 32}, 6).matmul(ws.transpose(0, 1)) + rand({48}, 7)).gelu(true);
  EXPECT_NE(opts_of(lower_last(z)).find("PACK"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(z, 1e-5, 1e-5));
  Tensor h = rand({32, 64}, 8).to(DType::BF16).matmul(rand({32, 64}, 9).to(DType::BF16).transpose(0, 1));
  EXPECT_TRUE(expect_matches_reference(h, 1e-2, 1e-2));
}

// q @ k.T per (batch, head): k is packed inside the batch x heads loop, once per head; after the
// tiles take both (16-long) inner loops as lanes, the copy is made inside every output loop left.
TEST(PackOperand, AttentionScoresPackPerHead) {
  Tensor q = rand({2, 3, 32, 16}, 10), k = rand({2, 3, 48, 16}, 11);
  Tensor s = q.matmul(k.transpose(2, 3));
  EXPECT_NE(opts_of(lower_last(s)).find("PACK 16x48"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(s, 1e-5, 1e-5));
  Tensor q1 = rand({1, 2, 16, 8}, 12), k1 = rand({1, 2, 16, 8}, 13);
  Tensor s1 = q1.matmul(k1.transpose(2, 3));
  EXPECT_NE(opts_of(lower_last(s1)).find("PACK 8x16"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(s1.softmax(-1), 1e-5, 1e-6));
}

// Heads merged back into rows (y.transpose(1, 2).reshape(B, T, C) @ w.T) read as two reduce loops:
// both are packed. Shapes with too little reuse (m < 16) or no column tile (n = 33) are not packed.
TEST(PackOperand, SplitReducesAndSmallShapes) {
  Tensor att = rand({2, 4, 16, 8}, 14), w = rand({32, 32}, 15);
  Tensor y = att.transpose(1, 2).reshape({2, 16, 32}).matmul(w.transpose(0, 1));
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {129, 65, 33}}) {
    Tensor c = rand({m, k}, 16).matmul(rand({n, k}, 17).transpose(0, 1));
    EXPECT_EQ(opts_of(lower_last(c)).find("PACK"), std::string::npos) << m << "x" << k << "x" << n;
    EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5)) << m << "x" << k << "x" << n;
  }
}

// The gradients of a linear layer on a batch of sequences: its forward packs the weight.
TEST(PackOperand, LinearForwardAndBackwardMatchTheReference) {
  Tensor x = rand({2, 24, 32}, 18), w = rand({48, 32}, 19), dy = rand({2, 24, 48}, 20);
  Tensor y = x.matmul(w.transpose(0, 1));
  auto g = grad({y}, {x, w}, {dy});
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(g[0], 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(g[1], 1e-5, 1e-5));
}

// Random shapes around the tile and block sizes, each operand plain or transposed, with a batch or
// not: packed, tiled and merged loops together against the reference.
TEST(PackOperand, RandomShapesMatchTheReference) {
  const int cases = 24;  // 400 pass too (about 20 s)
  std::mt19937 rng(7);
  const std::vector<int64_t> sizes{1, 3, 4, 8, 15, 16, 17, 31, 32, 33, 48, 64, 96};
  auto pick = [&] { return sizes[rng() % sizes.size()]; };
  for (int i = 0; i < cases; i++) {
    int64_t b = rng() % 3, m = pick(), k = pick(), n = pick();
    bool ta = rng() % 2, tb = rng() % 2;
    Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
    if (b) sa.insert(sa.begin(), b), sb.insert(sb.begin(), b);
    Tensor a = rand(sa, 100 + i), bb = rand(sb, 200 + i);
    int64_t d = static_cast<int64_t>(sa.size());
    Tensor c = (ta ? a.transpose(d - 2, d - 1) : a).matmul(tb ? bb.transpose(d - 2, d - 1) : bb);
    EXPECT_TRUE(expect_matches_reference(c, 1e-5, 1e-5))
        << "batch " << b << " " << m << "x" << k << "x" << n << (ta ? " a.T" : "") << (tb ? " b.T" : "");
  }
}

// A scratch filled inside the heads loop holds one head's copy: the heads stay a loop, not the
// tile's rows, also where the rows (29) take no tile (this threw "range used outside its loop").
TEST(PackOperand, TheLoopAScratchIsFilledInStaysALoop) {
  Tensor q = rand({4, 29, 8}, 21), k = rand({4, 32, 8}, 22);
  Tensor s = q.matmul(k.transpose(1, 2));
  std::string opts = opts_of(lower_last(s));
  EXPECT_NE(opts.find("PACK 8x32"), std::string::npos) << opts;
  EXPECT_EQ(opts.find("UPCAST 4"), std::string::npos) << opts;
  EXPECT_TRUE(expect_matches_reference(s, 1e-5, 1e-5));
}
