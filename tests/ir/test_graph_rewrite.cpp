// Graph rewrites: constant folding, algebraic identities (exact ones only), movement composition,
// no-op view removal; and the hash-consing that makes CSE free.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "ir/graph_rewrite.h"

using namespace kiln;
using ir::NodeRef;
using ir::Op;

namespace {
NodeRef rw(const Tensor& t) { return ir::rewrite_graph({t.node()})[0]; }
Tensor input(Shape s, DType t = DType::F32) { return zeros(s, {.dtype = t}).contiguous().realize(); }
}  // namespace

TEST(HashConsing, EqualExpressionsAreOneNode) {
  Tensor x = input({3, 4});
  EXPECT_EQ((x * 2 + 1).node().get(), (x * 2 + 1).node().get());
  EXPECT_NE((x * 2 + 1).node().get(), (x * 2 + 2).node().get());
  Tensor y = input({3, 4});  // another buffer: another node
  EXPECT_NE((x * 2).node().get(), (y * 2).node().get());
}

TEST(GraphRewrite, MultiplyByOneAndAddZeroVanish) {
  Tensor x = input({3, 4});
  EXPECT_EQ(rw(x * 1.0f).get(), x.node().get());
  EXPECT_EQ(rw(x + 0.0f).get(), x.node().get());
  EXPECT_EQ(rw((x + 0.0f) * 1.0f + 0.0f).get(), x.node().get());
}

TEST(GraphRewrite, MultiplyByZeroOnlyWhereExact) {
  Tensor xf = input({3}), xi = input({3}, DType::I32);
  EXPECT_EQ(rw(xf * 0.0f)->op, Op::MUL);  // NaN*0 is NaN: a float x*0 stays
  EXPECT_EQ(rw(xi * 0)->op, Op::CONST);   // exact for integers
  Tensor nan = full({2}, NAN);
  EXPECT_TRUE(std::isnan((nan * 0.0f).to_vector<float>()[0]));
  Settings saved = settings();
  settings().fast_math = true;
  EXPECT_EQ(rw(xf * 0.0f)->op, Op::CONST);
  settings() = saved;
}

TEST(GraphRewrite, ConstantsFold) {
  NodeRef n = rw((full({2, 2}, 3.0f) * 2.0f + 1.0f).exp2());
  ASSERT_EQ(n->op, Op::CONST);
  EXPECT_EQ(n->fval, 128.0);
  EXPECT_EQ(n->shape, (Shape{2, 2}));
  EXPECT_EQ(rw(full({3}, 7) * 6)->ival(), 42);
}

TEST(GraphRewrite, ReshapeOfReshapeIsOneReshape) {
  Tensor x = input({2, 3, 4});
  NodeRef n = rw(x.reshape({6, 4}).reshape({24}).reshape({4, 6}));
  ASSERT_EQ(n->op, Op::RESHAPE);
  EXPECT_EQ(n->src[0].get(), x.node().get());
  EXPECT_EQ(rw(x.reshape({24}).reshape({2, 3, 4})).get(), x.node().get());  // back to its shape: gone
}

TEST(GraphRewrite, PermuteOfPermuteComposesAndIdentityIsRemoved) {
  Tensor x = input({2, 3, 4});
  EXPECT_EQ(rw(x.permute({1, 2, 0}).permute({2, 0, 1})).get(), x.node().get());
  NodeRef n = rw(x.permute({1, 0, 2}).permute({0, 2, 1}));
  ASSERT_EQ(n->op, Op::PERMUTE);
  EXPECT_EQ(n->src[0].get(), x.node().get());
  EXPECT_EQ(n->arg, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(x.transpose(0, 1).transpose(0, 1).contiguous().to_vector<float>().size(), 24u);
}

TEST(GraphRewrite, NoOpViewsAreRemoved) {
  Tensor x = input({2, 3});
  EXPECT_EQ(rw(x.expand({2, 3})).get(), x.node().get());
  EXPECT_EQ(rw(x.slice(0, 0, 2)).get(), x.node().get());
  EXPECT_EQ(rw(x.pad({0, 0})).get(), x.node().get());
  EXPECT_EQ(rw(x.flip({})).get(), x.node().get());
  EXPECT_EQ(rw(x.to(DType::F32)).get(), x.node().get());
}

// bf16 widened to f32, viewed and rounded back to bf16 is the view of the bf16 value; a narrowing
// round trip (f32 -> bf16 -> f32) loses bits and stays.
TEST(GraphRewrite, AWideningCastRoundTripVanishesThroughViews) {
  Tensor h = input({2, 3}).to(DType::BF16);
  NodeRef n = rw(h.to(DType::F32).reshape({3, 2}).unsqueeze(0).expand({4, 3, 2}).to(DType::BF16));
  EXPECT_EQ(n.get(), rw(h.reshape({3, 2}).unsqueeze(0).expand({4, 3, 2})).get());
  Tensor x = input({2, 3});
  EXPECT_EQ(rw(x.to(DType::BF16).to(DType::F32))->op, Op::CAST);
}

// a cast of a transposed buffer casts the buffer in its own layout: realized, it is a plain copy
TEST(GraphRewrite, ACastOfAPermutedViewIsThePermutedCast) {
  Tensor w = arange(6).to(DType::F32).reshape({2, 3}).contiguous().realize();
  NodeRef n = rw(w.t().to(DType::BF16));
  ASSERT_EQ(n->op, Op::PERMUTE);
  ASSERT_EQ(n->src[0]->op, Op::CAST);
  EXPECT_EQ(n->src[0]->shape, (Shape{2, 3}));
  EXPECT_EQ(n->src[0]->src[0].get(), w.node().get());
  EXPECT_EQ(n->shape, (Shape{3, 2}));
  EXPECT_EQ(w.t().to(DType::BF16).to(DType::F32).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(GraphRewrite, ViewsOfConstantsAreConstants) {
  NodeRef n = rw(full({3}, 2.5f).reshape({3, 1}).expand({3, 4}).permute({1, 0}));
  ASSERT_EQ(n->op, Op::CONST);
  EXPECT_EQ(n->shape, (Shape{4, 3}));
}

TEST(GraphRewrite, DeadCodeIsNotScheduled) {
  Tensor x = input({4});
  Tensor unused = x.exp() * 3;  // built but never used by the realized tensor
  int64_t before = stats().kernels_run;
  (x + 1).realize();
  EXPECT_EQ(stats().kernels_run - before, 1);
  (void)unused;
}
