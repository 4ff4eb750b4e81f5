// Symbolic dimensions (kiln::Var, Tensor::symbolic): results equal the reference at several bound
// values, and the kernels compile once for all of them.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::expect_matches_reference;
using testing::random_tensor;

// Runs f at each size of B (a tensor of `shape` with dim `d` of that size, marked symbolic) and
// checks the results against the reference; the sizes after the first compile nothing. (A variable
// bound to 1 may get kernels of its own where the graph itself changes: a flip or a softmax over one
// element, fusion choices made for a dim of 1; those are tested for results only.)
void expect_one_compile(const Shape& shape, int64_t d, const std::vector<int64_t>& sizes,
                        const std::function<Tensor(const Tensor&)>& f, double rtol = 1e-5,
                        double atol = 1e-6) {
  testing::TempCache cache("kiln_symbolic");
  Var B("B", 1, 64);
  int64_t compiled = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    Shape s = shape;
    s[static_cast<size_t>(d)] = sizes[i];
    Tensor x = random_tensor(s, DType::F32, -1, 1, 7 + i).symbolic(d, B);
    int64_t before = stats().kernels_compiled;
    Tensor y = f(x);
    SCOPED_TRACE("B = " + std::to_string(sizes[i]));
    EXPECT_TRUE(expect_matches_reference(y, rtol, atol));
    if (i == 0)
      compiled = stats().kernels_compiled - before;
    else
      EXPECT_EQ(stats().kernels_compiled - before, 0) << "B = " << sizes[i] << " compiled new kernels";
  }
  EXPECT_GT(compiled, 0);
}

TEST(Symbolic, ElementwiseCompilesOnce) {
  expect_one_compile({3, 5}, 0, {3, 1, 17, 64},
                     [](const Tensor& x) { return ((x * 2 + 1).exp() - x).relu(); });
}

TEST(Symbolic, ReduceOverAndAlongTheSymbolicDim) {
  expect_one_compile({4, 6}, 0, {4, 1, 9, 33}, [](const Tensor& x) { return x.sum(1) * 3; });
  expect_one_compile({4, 6}, 0, {4, 1, 9, 33}, [](const Tensor& x) { return x.sum(0) + x.max(0); });
  expect_one_compile({6, 4}, 1, {4, 2, 11}, [](const Tensor& x) { return x.softmax(1); });
}

TEST(Symbolic, MatmulWithSymbolicRowsAndInner) {
  Tensor w = random_tensor({7, 5}, DType::F32, -1, 1, 3);
  expect_one_compile({4, 7}, 0, {4, 1, 13}, [&](const Tensor& x) { return x.matmul(w) + 1; });
  expect_one_compile({7, 4}, 1, {4, 3, 10},
                     [&](const Tensor& x) { return x.matmul(x.transpose(0, 1)); });  // (7, B) x (B, 7)
}

TEST(Symbolic, ViewsKeepTheDim) {
  // merged with a concrete dim, permuted, broadcast against, padded along another dim, flipped
  expect_one_compile({3, 4, 6}, 0, {3, 5, 2}, [](const Tensor& x) {
    Tensor m = x.reshape({x.size(0) * 4, 6});
    return (m * 2).reshape({x.size(0), 4, 6}).permute({2, 0, 1}) + x.permute({2, 0, 1}).flip({1});
  });
  expect_one_compile({5, 3}, 0, {5, 2, 8}, [](const Tensor& x) { return x.pad({1, 2}) * x.sum(1, true); });
  Tensor bias = random_tensor({6}, DType::F32, -1, 1, 5);
  expect_one_compile({2, 6}, 0, {2, 7}, [&](const Tensor& x) { return (x + bias).sum(0); });
}

// Whether an index of t's kernels divides by a variable's expression, or takes a remainder of one.
bool divides_by_a_variable(const Tensor& t) {
  auto has_var = [](const ir::NodeRef& e) {
    std::vector<const ir::Node*> todo{e.get()};
    while (!todo.empty()) {
      const ir::Node* n = todo.back();
      todo.pop_back();
      if (n->op == ir::Op::VAR) return true;
      for (auto& s : n->src) todo.push_back(s.get());
    }
    return false;
  };
  std::vector<const ir::Node*> todo;
  std::unordered_set<const ir::Node*> seen;
  for (auto& k : schedule::make_schedule(ir::rewrite_graph({t.node()})).kernels) todo.push_back(k.ast.get());
  while (!todo.empty()) {
    const ir::Node* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    if ((n->op == ir::Op::IDIV || n->op == ir::Op::MOD) && has_var(n->src[1])) return true;
    for (auto& s : n->src) todo.push_back(s.get());
  }
  return false;
}

TEST(Symbolic, PrefixOfACacheReshapedIndexesWithoutDivisions) {
  // attention's reads of a key cache (B, H, L, D) over its first T columns: the heads merged with the
  // batch (a reshape of the symbolic view) and a dot product over D. Each group of merged dims maps
  // its index on its own, so no index divides by T.
  testing::TempCache cache("kiln_symbolic_prefix");
  Tensor k_cache = random_tensor({2, 3, 16, 4}, DType::F32, -1, 1, 11),
         q = random_tensor({6, 1, 4}, DType::F32, -1, 1, 12);
  Var T("T", 1, 16);
  int64_t compiled = 0;
  for (int64_t t : {5, 12, 1, 9}) {  // below L: the whole cache is another graph (no slice)
    SCOPED_TRACE("T = " + std::to_string(t));
    Tensor k = k_cache.slice(2, 0, t).symbolic(2, T);
    Tensor scores = q.matmul(k.reshape({6, t, 4}).transpose(1, 2)).softmax(-1);  // (6, 1, T)
    Tensor y = scores.matmul(k.reshape({6, t, 4}));                              // (6, 1, 4)
    EXPECT_FALSE(divides_by_a_variable(y));
    int64_t before = stats().kernels_compiled;
    EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-6));
    if (t != 5 && t != 1) {  // a variable bound to 1 may get kernels of its own
      EXPECT_EQ(stats().kernels_compiled - before, 0);
    }
    compiled += stats().kernels_compiled - before;
  }
  EXPECT_GT(compiled, 0);
}

TEST(Symbolic, SecondDimAndTwoVariables) {
  testing::TempCache cache("kiln_symbolic2");
  Var B("B", 1, 16), T("T", 1, 32);
  int64_t first = -1;
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{{2, 5}, {3, 2}, {1, 9}, {4, 32}}) {
    Tensor x = random_tensor({b, t, 8}, DType::F32, -1, 1, static_cast<uint64_t>(b * 100 + t))
                   .symbolic(0, B)
                   .symbolic(1, T);
    int64_t before = stats().kernels_compiled;
    Tensor y = (x.reshape({b * t, 8}) * 3).sum(1).reshape({b, t}).softmax(1);
    EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-6)) << b << " " << t;
    if (first < 0)
      first = stats().kernels_compiled - before;
    else
      EXPECT_EQ(stats().kernels_compiled - before, 0) << b << " " << t;
  }
}

TEST(Symbolic, BoundToOneMatchesTheReference) {
  Var B("B", 1, 64), T("T", 1, 32);
  Tensor x = random_tensor({1, 1, 6}, DType::F32, -1, 1, 4).symbolic(0, B).symbolic(1, T);
  EXPECT_TRUE(expect_matches_reference((x.reshape({1, 6}) * 3).softmax(1).reshape({1, 1, 6}).flip({0, 1}) + x,
                                       1e-5, 1e-6));
  EXPECT_TRUE(expect_matches_reference(x.sum(1).softmax(0) * x.mean(0), 1e-5, 1e-6));
}

TEST(Symbolic, MeanOverASymbolicDimCompilesOnce) {
  expect_one_compile({4, 6}, 0, {4, 9, 2}, [](const Tensor& x) { return x.mean(0) + x.mean(); });
}

TEST(Symbolic, BadBindingsAreErrors) {
  Var B("B", 2, 8);
  Tensor x = random_tensor({9, 3}, DType::F32, -1, 1, 1);
  EXPECT_NE(error_of([&] { x.symbolic(0, B); }).find("outside B's bounds [2, 8]"), std::string::npos);
  EXPECT_NE(error_of([&] { Var("", 1, 2); }).find("needs a name"), std::string::npos);
  EXPECT_NE(error_of([&] { Var("Z", 5, 2); }).find("bounds"), std::string::npos);
  EXPECT_NE(error_of([&] { Var("a.b", 1, 2); }).find("letters, digits and _"), std::string::npos);
  // one variable standing for two sizes in one graph
  Tensor a = random_tensor({3, 2}, DType::F32, -1, 1, 2).symbolic(0, B);
  Tensor b = random_tensor({4, 2}, DType::F32, -1, 1, 3).symbolic(0, B);
  EXPECT_NE(error_of([&] { (a.sum(0) + b.sum(0)).realize(); }).find("stands for sizes"), std::string::npos);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Batches (B, T) of a repeating sequence, B marked symbolic.
Tensor cyclic_batch(int64_t b, int64_t t, int64_t offset) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < t; j++) v.push_back((3 * i + j + offset) % 11);
  return tensor(v, {b, t});
}

// Two copies of a GPT trained from the same start with AdamW, one on batches whose dim 0 is symbolic:
// step() trains both on (b, block_size) batches of a repeating sequence and returns both losses.
struct TwinGpts {
  nn::GPTConfig config;
  std::optional<DType> autocast;
  nn::GPT sym, con;
  optim::AdamW opt_sym, opt_con;
  Var B{"B", 1, 8};
  static nn::GPT seeded(const nn::GPTConfig& c, uint64_t seed) {
    manual_seed(seed);
    return nn::GPT(c);
  }
  TwinGpts(const nn::GPTConfig& c, uint64_t seed, double lr, std::optional<DType> autocast = std::nullopt)
      : config(c),
        autocast(autocast),
        sym(seeded(c, seed)),
        con(seeded(c, seed)),
        opt_sym(sym->parameters(), {.lr = lr}),
        opt_con(con->parameters(), {.lr = lr}) {}
  float one(nn::GPT& m, optim::AdamW& opt, int64_t b, bool symbolic) {
    Tensor x = cyclic_batch(b, config.block_size, 0), y = cyclic_batch(b, config.block_size, 1);
    if (symbolic) x = x.symbolic(0, B), y = y.symbolic(0, B);
    Tensor loss;
    {
      Autocast ac(autocast);
      loss = m(x, y).second;
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
  std::pair<float, float> step(int64_t b) {
    return {one(sym, opt_sym, b, true), one(con, opt_con, b, false)};
  }
};

// A training step whose batch dim is symbolic: the last, shorter batch compiles nothing new, and
// the losses are those of the same model trained on concrete batches.
TEST(Symbolic, ShorterLastBatchOfATrainingStepCompilesNothing) {
  testing::TempCache cache("kiln_symbolic_gpt");
  TwinGpts twins({.vocab_size = 11,
                  .block_size = 8,
                  .n_layer = 1,
                  .n_head = 2,
                  .n_embd = 16,
                  .dropout = 0,
                  .bias = true},
                 3, 1e-2);
  std::vector<int64_t> batches{4, 4, 4, 3};
  for (size_t i = 0; i < batches.size(); i++) {
    int64_t before = stats().kernels_compiled;
    float a = twins.one(twins.sym, twins.opt_sym, batches[i], true);
    int64_t compiled = stats().kernels_compiled - before;
    float b = twins.one(twins.con, twins.opt_con, batches[i], false);
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << i;
    if (i == batches.size() - 1) {
      EXPECT_EQ(compiled, 0) << "the last batch of " << batches[i] << " rows";
    }
  }
}

// The same under bf16 autocast with a batch that changes every step, large enough for the GEMM
// library and the flash-attention kernels where the device has them: each step's loss equals the
// concrete model's.
TEST(Symbolic, AutocastTrainingStepsAtChangingBatchesMatchConcrete) {
  TwinGpts twins({.vocab_size = 64,
                  .block_size = 64,
                  .n_layer = 1,
                  .n_head = 4,
                  .n_embd = 256,
                  .dropout = 0,
                  .bias = true},
                 4, 1e-3, DType::BF16);
  for (int64_t b : {8, 5, 3}) {
    auto [got, want] = twins.step(b);
    EXPECT_NEAR(got, want, 2e-3 * std::abs(want)) << "B = " << b;
  }
}

}  // namespace
}  // namespace kiln
