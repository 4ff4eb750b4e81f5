// F::scaled_dot_product_attention on the CPU, where it is the composite of matmuls and a softmax,
// and the ATTENTION node a GPU's kernel computes: checked against the reference interpreter (which
// evaluates the node itself in f64), gradients against finite differences, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "helpers.h"
#include "ir/node.h"
#include "kiln/functional.h"
#include "kiln/kiln.h"

using namespace kiln;
using kiln::testing::expect_gradients_match;
using kiln::testing::expect_matches_reference;
using kiln::testing::expect_values;
using kiln::testing::random_tensor;
namespace F = kiln::nn::functional;
using Ts = std::vector<Tensor>;

namespace {

Tensor r(const Shape& s, uint64_t seed, DType t = DType::F64) { return random_tensor(s, t, -1, 1, seed); }

// an ATTENTION node as a GPU's kernel takes it: q, k, v of one batch shape
Tensor attention_node(const Ts& x, bool causal, double scale) {
  Shape out = x[0].shape();
  out.back() = x[2].shape().back();
  return Tensor(ir::make(ir::Op::ATTENTION, x[0].dtype(), out, {x[0].node(), x[1].node(), x[2].node()},
                         {causal ? 1 : 0}, scale));
}

TEST(Attention, IsTheCompositeWhereNoKernelRuns) {
  Tensor y = F::scaled_dot_product_attention(r({2, 5, 4}, 1), r({2, 5, 4}, 2), r({2, 5, 4}, 3));
  EXPECT_NE(y.node()->op, ir::Op::ATTENTION) << "autograd differentiates the composite on the CPU";
  EXPECT_EQ(y.shape(), (Shape{2, 5, 4}));
  // the node itself (what a GPU runs as one kernel): the rewrite puts the composite in its place on
  // the CPU, the reference interpreter evaluates the node, and its own gradient rule holds
  for (bool causal : {false, true}) {
    Ts x{r({2, 6, 4}, 4), r({2, 5, 4}, 5), r({2, 5, 3}, 6)};
    Tensor a = attention_node(x, causal, 0.4);
    EXPECT_EQ(a.node()->op, ir::Op::ATTENTION);
    EXPECT_TRUE(expect_matches_reference(a));
    expect_gradients_match([causal](const Ts& in) { return attention_node(in, causal, 0.4); }, x, 7);
  }
}

// the largest |a - b|
double max_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

// The parts a GPU's backward kernels compute (ir/attention_layout.h), as nodes: on the CPU the rewrite
// puts their composites in place, the interpreter evaluates the nodes themselves, and together they
// are the gradients autograd finds for the composite.
TEST(Attention, BackwardPartsAreTheGradients) {
  auto part = [](int64_t p, const Ts& x, const Shape& shape, bool causal, double scale) {
    std::vector<ir::NodeRef> src;
    for (auto& t : x) src.push_back(t.node());
    return Tensor(ir::make(ir::Op::ATTENTION, DType::F64, shape, src, {causal ? 1 : 0, p}, scale));
  };
  for (bool causal : {false, true})
    for (int64_t tq : {6, 3}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + " Tq " + std::to_string(tq));
      int64_t tk = 5, d = 4;
      Tensor q = r({2, tq, d}, 21), k = r({2, tk, d}, 22), v = r({2, tk, d}, 23), dout = r({2, tq, d}, 24);
      for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
      Tensor y = attention_node({q, k, v}, causal, 0.4);
      Tensor lse = part(1, {q, k, v}, {2, tq}, causal, 0.4);
      EXPECT_TRUE(expect_matches_reference(lse));
      Tensor want_lse = (q.matmul(k.transpose(-2, -1)) * 0.4)
                            .masked_fill(causal ? ones({tq, tk}, {.dtype = DType::Bool}).tril().logical_not()
                                                : zeros({tq, tk}, {.dtype = DType::Bool}),
                                         -INFINITY)
                            .logsumexp({-1});
      EXPECT_LT(max_diff(lse, want_lse), 1e-12);
      Tensor delta = (dout * y.detach()).sum(-1);
      Ts src{q.detach(), k.detach(), v.detach(), dout, lse, delta};
      Tensor dq = part(2, src, {2, tq, d}, causal, 0.4), dkv = part(3, src, {2, tk, 2 * d}, causal, 0.4);
      EXPECT_TRUE(expect_matches_reference(dq));
      EXPECT_TRUE(expect_matches_reference(dkv));
      Ts g = grad({F::scaled_dot_product_attention(q, k, v, {.is_causal = causal, .scale = 0.4})}, {q, k, v},
                  {dout});
      EXPECT_LT(max_diff(dq, g[0]), 1e-12);
      EXPECT_LT(max_diff(dkv.narrow(-1, 0, d), g[1]), 1e-12);
      EXPECT_LT(max_diff(dkv.narrow(-1, d, d), g[2]), 1e-12);
    }
}

TEST(Attention, MatchesTheReference) {
  struct Case {
    Shape q, k, v;
    bool causal;
  };
  for (const Case& c : std::vector<Case>{
           {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, false},
           {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, true},
           {{2, 7, 4}, {2, 3, 4}, {2, 3, 6}, true},        // Tq > Tk: later rows see every key
           {{2, 3, 4}, {2, 7, 4}, {2, 7, 2}, true},        // Tq < Tk: top-left aligned
           {{2, 3, 4}, {2, 7, 4}, {2, 7, 2}, false},       //
           {{2, 1, 5, 4}, {3, 6, 4}, {1, 3, 6, 2}, true},  // batch dims broadcast
           {{5, 4}, {6, 4}, {6, 3}, false},                // no batch dims
           {{1, 1, 4}, {1, 1, 4}, {1, 1, 1}, true},        // size-1 dims
       }) {
    SCOPED_TRACE(shape_str(c.q) + " " + shape_str(c.k) + " " + shape_str(c.v) + (c.causal ? " causal" : ""));
    Tensor y = F::scaled_dot_product_attention(r(c.q, 1), r(c.k, 2), r(c.v, 3), {.is_causal = c.causal});
    EXPECT_TRUE(expect_matches_reference(y, 1e-9, 1e-12));
  }
}

TEST(Attention, ValuesAndScale) {
  // one query over two keys with scores 0 and 2 * scale: weights softmax(0, 2s)
  Tensor q = tensor(std::vector<double>{1, 1}).reshape({1, 2}),
         k = tensor(std::vector<double>{0, 0, 1, 1}).reshape({2, 2}),
         v = tensor(std::vector<double>{10, 20}).reshape({2, 1});
  double w = 1 / (1 + std::exp(-1.0));  // scale 0.5: scores 0 and 1
  EXPECT_TRUE(expect_values(F::scaled_dot_product_attention(q, k, v, {.scale = 0.5}), {10 * (1 - w) + 20 * w},
                            1e-12));
  double d = 1 / (1 + std::exp(-2.0 / std::sqrt(2.0)));  // default scale 1/sqrt(2)
  EXPECT_TRUE(expect_values(F::scaled_dot_product_attention(q, k, v), {10 * (1 - d) + 20 * d}, 1e-12));
  EXPECT_TRUE(expect_values(F::scaled_dot_product_attention(q, k, v, {.is_causal = true}), {10}, 1e-12));
}

TEST(Attention, EmptyDims) {
  Tensor none = F::scaled_dot_product_attention(r({2, 0, 4}, 1), r({2, 3, 4}, 2), r({2, 3, 5}, 3));
  EXPECT_EQ(none.shape(), (Shape{2, 0, 5}));
  EXPECT_TRUE(expect_values(none, {}));
  // no keys: the weighted sum of nothing is zero
  EXPECT_TRUE(expect_values(
      F::scaled_dot_product_attention(r({1, 2, 4}, 1), r({1, 0, 4}, 2), r({1, 0, 2}, 3)), {0, 0, 0, 0}));
  EXPECT_EQ(
      F::scaled_dot_product_attention(r({0, 2, 4}, 1), r({0, 3, 4}, 2), r({0, 3, 2}, 3)).realize().numel(),
      0);
}

TEST(Attention, Gradients) {
  for (bool causal : {false, true}) {
    auto fn = [causal](const Ts& x) {
      return F::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = causal});
    };
    expect_gradients_match(fn, {r({2, 5, 3}, 4), r({2, 5, 3}, 5), r({2, 5, 2}, 6)}, 7);
    expect_gradients_match(fn, {r({2, 3, 3}, 8), r({2, 6, 3}, 9), r({2, 6, 2}, 10)}, 11);
  }
  // broadcast batch dims sum their gradients; an explicit scale
  expect_gradients_match(
      [](const Ts& x) {
        return F::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true, .scale = 0.3});
      },
      {r({2, 1, 4, 3}, 12), r({3, 4, 3}, 13), r({1, 3, 4, 2}, 14)}, 15);
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("scaled_dot_product_attention"), std::string::npos) << m;
    for (auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

TEST(Attention, BadArguments) {
  auto sdpa = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    F::scaled_dot_product_attention(q, k, v);
  };
  expect_error([&] { sdpa(r({4}, 1), r({3, 4}, 2), r({3, 4}, 3)); }, {"rank 2", "(4,)", "(3, 4)"});
  expect_error([&] { sdpa(r({2, 4}, 1), r({3, 5}, 2), r({3, 5}, 3)); }, {"last dim", "(2, 4)", "(3, 5)"});
  expect_error([&] { sdpa(r({2, 4}, 1), r({3, 4}, 2), r({2, 4}, 3)); }, {"Tk", "(3, 4)", "(2, 4)"});
  expect_error([&] { sdpa(r({2, 4}, 1), r({3, 4}, 2, DType::F32), r({3, 4}, 3)); }, {"dtype", "f64", "f32"});
  expect_error(
      [&] {
        sdpa(r({2, 4}, 1, DType::I32), r({3, 4}, 2, DType::I32), r({3, 4}, 3, DType::I32));
      },
      {"floating-point", "i32"});
  expect_error(
      [&] {
        sdpa(r({2, 2, 4}, 1), r({3, 3, 4}, 2), r({3, 3, 4}, 3));
      },
      {"broadcast", "(2, 2, 4)", "(3, 3, 4)"});
  Tensor on_gpu = zeros({3, 4}, {.dtype = DType::F64, .device = Device::cuda()});  // lazy: no GPU needed
  Tensor q = r({2, 4}, 1).to(Device::cpu()), v = r({3, 4}, 3).to(Device::cpu());   // whatever the default
  expect_error([&] { sdpa(q, on_gpu, v); }, {"device", "cpu", "cuda:0"});
}

}  // namespace
