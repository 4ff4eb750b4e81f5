// nn::GPT: parameter count from the config (GPT-2 small), names and tying, initialization,
// forward against the reference, loss gradients in float64, SGD training on a repeating sequence,
// and generate() (shape, context cropping, determinism, greedy top_k = 1).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"
#include "ir/node.h"
#include "nn/nn_check.h"
#include "nn/util.h"

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::expect_matches_reference;
using kiln::testing::expect_module_gradients;
using kiln::testing::expect_values;
using kiln::testing::parameter_names;
using Ts = std::vector<Tensor>;

namespace {
nn::GPTConfig tiny() {
  return {
      .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0, .bias = true};
}
// tokens (B, T): row b is the cyclic sequence 0, 1, ..., 10 starting at 3b (+ offset)
Tensor cyclic(int64_t B, int64_t T, int64_t offset = 0) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) v.push_back((3 * b + t + offset) % 11);
  return tensor(v, {B, T});
}
double stdev(const Tensor& t) {
  auto v = t.to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x, s += x * x;
  m /= static_cast<double>(v.size());
  return std::sqrt(s / static_cast<double>(v.size()) - m * m);
}
}  // namespace

TEST(GptConfig, ParameterCountWithoutBuilding) {
  EXPECT_EQ(nn::GPTConfig{}.num_parameters(), 124439808);  // GPT-2 small, tied embeddings
  nn::GPTConfig no_bias{};
  no_bias.bias = false;
  EXPECT_EQ(no_bias.num_parameters(), 124439808 - 12 * (3 * 768 + 768 + 4 * 768 + 768 + 2 * 768) - 768);
  manual_seed(1);
  nn::GPT g(tiny());
  EXPECT_EQ(g->num_parameters(), tiny().num_parameters());
  auto cfg = tiny();
  cfg.bias = false, cfg.n_layer = 1;
  EXPECT_EQ(nn::GPT(cfg)->num_parameters(), cfg.num_parameters());
}

TEST(Gpt, NamesTyingAndInit) {
  manual_seed(2);
  nn::GPTConfig cfg = tiny();
  cfg.n_embd = 32, cfg.vocab_size = 64;
  nn::GPT g(cfg);
  auto names = parameter_names(*g);
  EXPECT_EQ(names.front(), "wte.weight");
  EXPECT_EQ(names[1], "wpe.weight");
  EXPECT_EQ(names[2], "h.0.ln1.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");
  for (auto& n : names) EXPECT_EQ(n.find("lm_head"), std::string::npos);
  EXPECT_EQ(g->lm_head_weight().node(), g->wte->weight.node());  // one Tensor
  auto blk = g->h->at<nn::TransformerBlockImpl>(0);
  EXPECT_NEAR(stdev(g->wte->weight), 0.02, 0.003);
  EXPECT_NEAR(stdev(blk->fc->weight), 0.02, 0.002);
  EXPECT_NEAR(stdev(blk->attn->in_proj->weight), 0.02, 0.002);
  EXPECT_NEAR(stdev(blk->proj->weight), 0.01, 0.001);  // 0.02 / sqrt(2 * 2 layers)
  EXPECT_NEAR(stdev(blk->attn->out_proj->weight), 0.01, 0.0015);
  expect_values(blk->fc->bias, std::vector<double>(128, 0.0));
  expect_values(blk->ln2->weight, std::vector<double>(32, 1.0));
  for (auto& p : g->parameters()) EXPECT_TRUE(p.is_leaf() && p.requires_grad());
}

// GPT sets every parameter itself, so its layers' own defaults are not computed (DeferredInit): no
// kernel runs for them and the layers' parameters are buffers of their own; GPT sets the layer
// norms too.
TEST(Gpt, LayerDefaultsAreNotComputed) {
  int64_t before = stats().kernels_run;
  {
    nn::detail::DeferredInit deferred;
    nn::Linear l(8, 4);
    EXPECT_EQ(stats().kernels_run, before);
    EXPECT_NE(l->weight.node(), l->bias.node());
    EXPECT_EQ(l->weight.node()->op, ir::Op::BUFFER);
  }
  manual_seed(5);
  nn::GPT g(tiny());
  double ln_ones = 0;
  for (auto& [name, p] : g->named_parameters())
    if (name.find("ln") != std::string::npos && name.find("weight") != std::string::npos)
      for (double v : p.to(DType::F64).to_vector<double>()) ln_ones += v;
  EXPECT_EQ(ln_ones, 5.0 * tiny().n_embd);  // ln1, ln2 of two blocks and ln_f: ones
}

TEST(Gpt, ForwardShapesReferenceAndErrors) {
  manual_seed(3);
  nn::GPT g(tiny());
  Tensor idx = cyclic(2, 5);
  Tensor logits = g(idx);
  EXPECT_EQ(logits.shape(), (Shape{2, 5, 11}));
  expect_matches_reference(logits, 1e-4, 1e-5);
  auto [l2, loss] = g(idx, cyclic(2, 5, 1));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<float>(), std::log(11.0), 0.1);  // near-uniform predictions at init
  loss.backward();  // every parameter is a leaf of its own, zero-initialized biases too
  for (auto& [n, p] : g->named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
  expect_error([&] { g(cyclic(1, 9)); }, {"GPT", "sequence length 9", "(1, 9)", "block_size = 8"});
  expect_error([&] { g(zeros({2, 3})); }, {"GPT", "integer tokens of shape (B, T)", "f32"});
  expect_error([&] { g(idx, cyclic(2, 4)); }, {"GPT", "targets", "(2, 4)"});
}

TEST(Gpt, LossGradientsMatchFiniteDifferences) {
  manual_seed(4);
  nn::GPT g(nn::GPTConfig{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 2, .n_embd = 4});
  g->to(DType::F64);
  Tensor idx = tensor(std::vector<int64_t>{0, 3, 1, 4, 2, 2}, {2, 3});
  Tensor targets = tensor(std::vector<int64_t>{3, 1, 4, 2, 2, -1}, {2, 3});  // -1 is ignored
  expect_module_gradients(
      *g, {}, [&](const Ts&) { return g(idx, targets).second; }, 46);
}

TEST(Gpt, TrainsWithSGD) {
  manual_seed(5);
  nn::GPT g(tiny());
  Tensor idx = cyclic(4, 8), targets = cyclic(4, 8, 1);
  Ts params = g->parameters();
  double lr = 1.0, first = 0, last = 0;
  for (int step = 0; step < 50; step++) {
    Tensor loss = g(idx, targets).second;
    g->zero_grad();
    loss.backward();
    for (auto& p : params) p.assign_(p - lr * p.grad());
    Ts all = params;
    all.push_back(loss);
    realize(all);
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST(Gpt, GenerateShapesCroppingDeterminismGreedy) {
  manual_seed(6);
  nn::GPT g(tiny());
  g->eval();
  Tensor prompt = cyclic(2, 3);
  Generator g1(7), g2(7);
  Tensor a = g->generate(prompt, 7, 1.0, std::nullopt, &g1);
  Tensor b = g->generate(prompt, 7, 1.0, std::nullopt, &g2);
  EXPECT_EQ(a.shape(), (Shape{2, 10}));  // 10 > block_size: the context was cropped
  EXPECT_EQ(a.dtype(), DType::I64);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  EXPECT_EQ(a.slice(1, 0, 3).to_vector<int64_t>(), prompt.to_vector<int64_t>());
  for (int64_t t : a.to_vector<int64_t>()) EXPECT_TRUE(t >= 0 && t < 11);
  // a prompt longer than block_size: only the last 8 tokens matter
  Tensor long_prompt = cyclic(1, 10);
  Generator g3(9), g4(9);
  Tensor c = g->generate(long_prompt, 2, 0.8, 5, &g3);
  Tensor d = g->generate(long_prompt.slice(1, 2, 10), 2, 0.8, 5, &g4);
  EXPECT_EQ(c.shape(), (Shape{1, 12}));
  EXPECT_EQ(c.slice(1, 10, 12).to_vector<int64_t>(), d.slice(1, 8, 10).to_vector<int64_t>());
  // top_k = 1 is greedy
  Generator g5(11);
  Tensor greedy = g->generate(prompt, 3, 1.0, 1, &g5);
  Tensor want = prompt;
  for (int i = 0; i < 3; i++) want = cat({want, g(want).index({Slice(), -1, Slice()}).argmax(-1, true)}, 1);
  EXPECT_EQ(greedy.to_vector<int64_t>(), want.to_vector<int64_t>());
  expect_error([&] { g->generate(prompt, 1, 0.0); }, {"GPT", "temperature must be > 0"});
}

// on_token sees each step's tokens as they are drawn (kiln sample streams them), the same tokens
// generate returns.
TEST(Gpt, GenerateCallsOnTokenEachStep) {
  manual_seed(6);
  nn::GPT g(tiny());
  g->eval();
  Tensor prompt = cyclic(2, 3);
  std::vector<std::vector<int64_t>> seen;
  Generator g1(7), g2(7);
  Tensor out = g->generate(prompt, 4, 1.0, std::nullopt, &g1, [&](const Tensor& next) {
    EXPECT_EQ(next.shape(), (Shape{2, 1}));
    seen.push_back(next.to_vector<int64_t>());
  });
  ASSERT_EQ(seen.size(), 4u);
  for (int64_t step = 0; step < 4; step++)
    EXPECT_EQ(seen[step], out.slice(1, 3 + step, 4 + step).to_vector<int64_t>()) << step;
  EXPECT_EQ(out.to_vector<int64_t>(), g->generate(prompt, 4, 1.0, std::nullopt, &g2).to_vector<int64_t>());
}
