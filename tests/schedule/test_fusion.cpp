// Fusion is tested by counting the kernels a realize runs.
#include <gtest/gtest.h>
#include <kiln/autocast.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
int64_t kernels_for(std::vector<Tensor> ts) {
  int64_t before = stats().kernels_run;
  for (auto& t : ts) expect_matches_reference(t, 1e-4, 1e-5);
  return stats().kernels_run - before;
}
Tensor r(Shape s, uint64_t seed) { return random_tensor(s, DType::F32, -2, 2, seed); }
}  // namespace

TEST(Fusion, ElementwiseChainIsOneKernel) {
  Tensor x = r({16, 32}, 1);
  EXPECT_EQ(kernels_for({(x * 2 + 1).relu().exp()}), 1);
}

TEST(Fusion, TwoReducesOfOneInputAreOneKernel) {
  Tensor x = r({16, 32}, 2);
  EXPECT_EQ(kernels_for({x.sum(1) + x.max(1)}), 1);
}

TEST(Fusion, MatmulBiasReluIsOneKernel) {
  Tensor x = r({8, 16}, 3), w = r({16, 12}, 4), b = r({12}, 5);
  EXPECT_EQ(kernels_for({(x.matmul(w) + b).relu()}), 1);
}

TEST(Fusion, BroadcastMultiplyAddTanhIsOneKernel) {
  Tensor a = r({64, 48}, 6), b = r({64, 48}, 7), c = r({1, 48}, 8);
  EXPECT_EQ(kernels_for({a * b + c.tanh()}), 1);
}

TEST(Fusion, SoftmaxIsAtMostThreeKernels) {
  Tensor x = r({8, 40}, 9);
  EXPECT_LE(kernels_for({x.softmax(1)}), 3);
  Tensor y = r({8, 40}, 10);
  EXPECT_LE(kernels_for({y.softmax(0)}), 3);
}

TEST(Fusion, SharedReduceIsComputedOnce) {
  Tensor x = r({16, 32}, 11);
  Tensor s = x.sum(1, true);
  // a row's sum broadcast back over the row: one kernel that sums each row once, before the loop
  // over the row (so the kernel does O(rows * cols) work, not O(rows * cols^2))
  EXPECT_EQ(kernels_for({x - s}), 1);
  auto sched = schedule::make_schedule(ir::rewrite_graph({(x - s).node()}));
  ASSERT_EQ(sched.kernels.size(), 1u);
  EXPECT_LT(codegen::lower(sched.kernels[0].ast).program.flops, 8.0 * 16 * 32);  // per element: 32x more
  Tensor c = x.sum(0, true);  // a column's sum is not a row: realized, as before
  EXPECT_EQ(kernels_for({x - c}), 2);
}

TEST(Fusion, LayerNormForwardIsOneKernel) {
  Tensor x = r({8, 48}, 13), w = r({48}, 14), b = r({48}, 15);
  EXPECT_EQ(kernels_for({F::layer_norm(x, {48}, w, b)}), 1);
  EXPECT_TRUE(kiln::testing::expect_matches_reference(F::layer_norm(x, {48}, w, b), 1e-5, 1e-5));
}

// A layer norm whose input is computed in the same schedule (a residual add) with its backward: the
// kernel that normalizes the rows stores the residual too and computes the rows' mean and rstd
// itself; the backward reads the residual and the statistics (mean, variance and rstd: one kernel),
// never a stored x - mean. Was 5 kernels (4 for the layer norm alone), now 3.
TEST(Fusion, LayerNormWithItsResidualAndBackward) {
  Tensor x = r({8, 40}, 40), a = r({8, 40}, 41), w = r({40}, 42), b = r({40}, 43), gy = r({8, 40}, 44);
  EXPECT_EQ(kernels_for({F::layer_norm(x, {40}, w, b).to(DType::BF16)}), 1);  // as autocast casts it
  Tensor h = x + a, y = F::layer_norm(h, {40}, w, b);
  auto g = grad({y}, {x, w, b}, {gy});
  std::vector<Tensor> all{h, y, g[0], g[1], g[2]};
  std::vector<ir::NodeRef> roots;
  for (auto& t : all) roots.push_back(t.node());
  auto sched = schedule::make_schedule(ir::rewrite_graph(roots));
  EXPECT_LE(sched.kernels.size(), 3u);
  const schedule::Kernel& first = sched.kernels.at(0);  // dx joins it too: the same rows
  ASSERT_GE(first.outputs.size(), 2u);
  EXPECT_EQ(first.outputs[0], h.node());
  EXPECT_EQ(first.outputs[1], y.node());
  for (auto& in : first.inputs) EXPECT_NE(in->shape, (Shape{8, 1})) << "reads no row statistic";
  int64_t before = stats().kernels_run;
  realize(all);
  EXPECT_LE(stats().kernels_run - before, 3);
  for (size_t i = 0; i < all.size(); i++) EXPECT_TRUE(expect_matches_reference(all[i], roots[i], 1e-4, 1e-5));
  // the gradients against finite differences (float64)
  auto f64 = [](const Tensor& t) { return t.to(DType::F64).realize(); };
  expect_gradients_match(
      [](const std::vector<Tensor>& v) { return F::layer_norm(v[0] + v[1], {40}, v[2], v[3]); },
      {f64(x), f64(a), f64(w), f64(b)}, 45);
}

// A GPT step as a GPU with a GEMM library schedules it (no GPU needed; GPT-2's width, so the
// matmuls go to the library): each layer norm after a residual add is one kernel that adds the
// residual and writes it (f32) and its normalized rows (bf16), computing the row statistics itself
// (all but the first, which reads the embeddings). Two layers were 147 kernels, now 128: per layer
// norm no x - mean is stored, mean, variance and rstd are one kernel, the backward's row sums one.
TEST(Fusion, GptStepLayerNormIsOneKernelWithItsResidual) {
  manual_seed(5);
  nn::GPT model(
      nn::GPTConfig{.vocab_size = 512, .block_size = 256, .n_layer = 2, .n_head = 12, .n_embd = 768});
  Tensor idx = randint(0, 512, {4, 256}).realize(), tgt = randint(0, 512, {4, 256}).realize();
  Tensor loss;
  {
    Autocast ac(DType::BF16);
    loss = model->forward(idx, tgt).second;
  }
  std::vector<ir::NodeRef> roots{loss.node()};
  for (auto& g : grad({loss}, model->parameters())) roots.push_back(g.node());
  auto sched = schedule::make_schedule(ir::rewrite_graph(roots), {.library_gemm = true});
  // 131: each linear layer's bias is rounded to bf16 by a kernel of its own (a few hundred elements)
  // so that the GEMM adds it in its epilogue; the bf16 copies of the layer norms' input gradients
  // are written by the kernels that compute them
  EXPECT_LE(sched.kernels.size(), 131u);
  int found = 0;
  for (auto& k : sched.kernels) {
    bool residual_and_norm = codegen::kernel_name(k.ast).rfind("r_", 0) == 0 && k.outputs.size() == 2 &&
                             k.outputs[0]->shape == Shape{4, 256, 768} && k.outputs[0]->dtype == DType::F32 &&
                             k.outputs[1]->dtype == DType::BF16;
    found += residual_and_norm && std::none_of(k.inputs.begin(), k.inputs.end(), [](const ir::NodeRef& in) {
               return in->shape == Shape{4, 256, 1};
             });
  }
  EXPECT_EQ(found, 4);
  realize({});  // the embedding's and the loss's index checks: later tests count only their kernels
}

TEST(Fusion, ReducesOfOneSizeThatMoveWithDifferentLoopsStaySeparate) {
  // a matmul over K = 3 minus a row sum over 3 (attention's backward has this shape): the row sum is
  // computed before the column loop opens, the matmul's reduce inside it
  Tensor g = r({5, 3}, 30), k = r({7, 3}, 31), o = r({5, 3}, 32);
  EXPECT_EQ(kernels_for({g.matmul(k.t()) - (g * o).sum(-1, true)}), 1);
  EXPECT_EQ(kernels_for({(g * o).sum(-1, true) * g.matmul(k.t()).softmax(-1)}), 2);
}

TEST(Fusion, ContiguousIsARealizePoint) {
  Tensor x = r({16, 32}, 12);
  EXPECT_EQ(kernels_for({(x * 2).contiguous().t() + 1}), 2);
}

TEST(Fusion, CostModelCountsBytes) {
  // recompute reads the inputs again in each consumer; storing writes once and reads per consumer
  EXPECT_FALSE(schedule::store_is_cheaper(2, 4, 4));   // one f32 input, two consumers: 8 vs 16 bytes
  EXPECT_FALSE(schedule::store_is_cheaper(2, 12, 4));  // three f32 inputs, two consumers: 24 vs 24
  EXPECT_TRUE(schedule::store_is_cheaper(3, 12, 4));   // three consumers: 36 vs 28
  EXPECT_TRUE(schedule::store_is_cheaper(2, 16, 4));   // four inputs: 32 vs 28
}

TEST(Fusion, ReducesOfOneInputRealizedTogetherShareOneKernel) {
  Tensor x = r({16, 32}, 13);
  Tensor s = x.sum(1), m = x.max(1), e = x.exp().sum(1);
  int64_t before = stats().kernels_run;
  realize({s, m, e});
  EXPECT_EQ(stats().kernels_run - before, 1);
  auto xv = x.to_vector<float>();
  auto sv = s.to_vector<float>(), mv = m.to_vector<float>();
  for (int i = 0; i < 16; i++) {
    float ss = 0, mm = -INFINITY;
    for (int j = 0; j < 32; j++) ss += xv[i * 32 + j], mm = std::max(mm, xv[i * 32 + j]);
    EXPECT_NEAR(sv[i], ss, 1e-4);
    EXPECT_EQ(mv[i], mm);
  }
}

TEST(Fusion, NormalizationAndLossKernelCounts) {
  Tensor x = r({8, 40}, 20), w = r({40}, 21), b = r({40}, 22);
  Tensor cls = tensor(std::vector<int64_t>{1, 0, 3, 39, 7, 7, 2, 5});
  EXPECT_LE(kernels_for({x.log_softmax(1)}), 3);
  EXPECT_LE(kernels_for({F::layer_norm(x, {40}, w, b)}), 3);
  EXPECT_LE(kernels_for({F::cross_entropy(x, cls)}), 3);
  // layer_norm forward and backward (dx, dw, db) together
  Tensor y = F::layer_norm(x, {40}, w, b);
  auto g = grad({y}, {x, w, b}, {r({8, 40}, 23)});
  int64_t before = stats().kernels_run;
  realize({y, g[0], g[1], g[2]});
  EXPECT_LE(stats().kernels_run - before, 3);  // was 4: x - mean was stored, mean and variance apart
}

TEST(Fusion, ALossAndItsGradientReadTheLogitsOnce) {
  // cross-entropy's row max and sum of exponentials are computed by the kernel of its gradient,
  // which stores them for the loss: one kernel reads the logits' rows (the loss reads one logit a
  // row, its target's)
  Tensor lg = random_tensor({16, 1000}, DType::F32, -4, 4, 24);
  lg.requires_grad_();
  Tensor cls = tensor(std::vector<int64_t>{1, 0, 999, 7, 7, 150, 3, 3, 8, 9, 10, 500, 12, 13, 14, 15});
  Tensor loss = F::cross_entropy(lg, cls);
  Tensor dl = grad({loss}, {lg})[0];
  auto sched = schedule::make_schedule(ir::rewrite_graph({loss.node(), dl.node()}));
  int readers = 0;
  for (auto& k : sched.kernels) {
    bool reads = std::any_of(k.inputs.begin(), k.inputs.end(), [&](auto& n) { return n == lg.node(); });
    if (!reads || k.outputs[0]->numel() == 1) continue;
    readers++;
    EXPECT_EQ(k.outputs.size(), 3u);  // the gradient, the row max and the row sum
    EXPECT_EQ(k.outputs[0]->shape, (ir::Shape{16, 1000}));
  }
  EXPECT_EQ(readers, 1);
  expect_matches_reference(loss, 1e-4, 1e-5);
  expect_matches_reference(dl, 1e-4, 1e-5);
}

TEST(Fusion, ACastOfAReducingKernelsOutputIsStoredByThatKernel) {
  // a layer norm's input gradient in f32 and its bf16 copy for the matmul before it: one kernel
  // writes both (the copy reads the gradient only at its own index)
  Tensor x = r({64, 96}, 25), w = r({96}, 26), b = r({96}, 27), dy = r({64, 96}, 28);
  x.requires_grad_();
  Tensor dx = grad({F::layer_norm(x, {96}, w, b)}, {x}, {dy})[0];
  auto count = [](const std::vector<Tensor>& ts) {
    std::vector<ir::NodeRef> roots;
    for (auto& t : ts) roots.push_back(t.node());
    return schedule::make_schedule(ir::rewrite_graph(roots)).kernels.size();
  };
  Tensor copy = dx.to(DType::BF16);
  EXPECT_EQ(count({dx, copy}), count({dx}));
  // a copy that moves the index (a transpose) reads other rows: a kernel of its own
  EXPECT_EQ(count({dx, dx.transpose(0, 1).contiguous()}), count({dx}) + 1);
  realize({dx, copy});
  expect_matches_reference(copy, 1e-2, 1e-2);
}

TEST(Fusion, CostlyWorkBroadcastIntoAReduceIsStored) {
  // exp(x)*3+1 feeds a matmul: fused, it would be recomputed for each of w's 48 columns
  Tensor x = r({64, 32}, 30), w = r({32, 48}, 31);
  EXPECT_EQ(kernels_for({(x.exp() * 3 + 1).matmul(w)}), 2);
  // a cheap producer stays fused (one multiply per use)
  EXPECT_EQ(kernels_for({(x * 3).matmul(w)}), 1);
  // and a small costly one too (a per-row statistic: an extra kernel would cost more)
  Tensor s = r({4, 32}, 32);
  EXPECT_EQ(kernels_for({(s.exp() * 3 + 1).matmul(w)}), 1);
}

namespace {
// The flops of the kernels one realize of `t` schedules, summed.
double scheduled_flops(const Tensor& t) {
  double f = 0;
  for (auto& k : schedule::make_schedule(ir::rewrite_graph({t.node()})).kernels)
    f += codegen::lower(k.ast).program.flops;
  return f;
}
}  // namespace

TEST(Fusion, OneHotSumsBecomeIndexedLoads) {
  // embedding and gather are sums of one-hot selections: folded, each output reads one element,
  // so the work does not grow with the vocabulary (64 x 1000 x 16 compares unfolded)
  Tensor w = r({1000, 16}, 40);
  Tensor tok = tensor(std::vector<int64_t>{0, 999, 5, 5, 17, 998, 1, 3});
  Tensor e = F::embedding(tok, w);
  EXPECT_EQ(kernels_for({e}), 2);  // the lookup, and the check that every index is in range
  EXPECT_LT(scheduled_flops(e), 8.0 * 16 * 20);
  Tensor x = r({6, 300}, 41);
  Tensor idx = tensor(std::vector<int64_t>{299, 0, 7, 7, 150, 1}).reshape({6, 1});
  Tensor g = x.gather(1, idx);
  EXPECT_EQ(kernels_for({g}), 1);
  EXPECT_LT(scheduled_flops(g), 6.0 * 20);
  // the target term of cross-entropy reads one logit per row; its gradient stays one pass
  Tensor lg = r({6, 300}, 42);
  lg.requires_grad_();
  Tensor cls = tensor(std::vector<int64_t>{1, 0, 299, 7, 7, 150});
  Tensor loss = F::cross_entropy(lg, cls);
  auto dl = grad({loss}, {lg})[0];
  double total = 0;
  for (auto& k : schedule::make_schedule(ir::rewrite_graph({loss.node(), dl.node()})).kernels)
    total += codegen::lower(k.ast).program.flops;
  EXPECT_LT(total, 6.0 * 300 * 30);  // a few passes of a few ops over the logits, none row x row
  expect_matches_reference(loss, 1e-4, 1e-5);
  expect_matches_reference(dl, 1e-4, 1e-5);
}

// Realizing a tensor that is already realized schedules nothing below it: its graph's sources were
// never rewritten (a DETACH there once reached the kernel builder)
TEST(Fusion, RealizedTensorIsALeafOfLaterSchedules) {
  Tensor y = tensor({-1.44f}, {1, 1}).log_softmax(0).contiguous() * 2.0;
  y.sum(0, true).realize();
  EXPECT_NO_THROW(y.realize());
  EXPECT_EQ(y.item<float>(), 0.0f);
  Tensor z = tensor({-1.f, 2.f}, {2, 1}).log_softmax(0).contiguous() * 2.0;
  z.sum(0, true).realize();
  EXPECT_TRUE(
      kiln::testing::expect_values((z + 1).sum(), {2 + 2 * (-3 - 2 * std::log1p(std::exp(-3.0)))}, 1e-6));
}

TEST(Fusion, ReducesNestedDeeperThanTheLimitAreCut) {
  // each step's mean reduces the step before: one kernel would compute every level again inside
  // each reduce above it (time quadratic in the steps), so the chain is cut every kMaxNestedReduces
  Tensor y = r({4, 16}, 31);
  constexpr int kSteps = 40;
  for (int i = 0; i < kSteps; i++) y = y - y.mean(-1, true) * 0.5;
  int64_t k = kernels_for({y});
  EXPECT_GE(k, kSteps / static_cast<int64_t>(schedule::kMaxNestedReduces));
  EXPECT_LE(k, 2 * kSteps / static_cast<int64_t>(schedule::kMaxNestedReduces) + 1);
}

// A training step nests many reduces across its layers, but each kernel only its own: the cut for
// deep chains counts within kernels, so it never stores a matmul's broadcast product (a kernel that
// writes many times the elements it reads; embeddings and concatenations write about as many).
TEST(Fusion, ATrainingStepStoresNoBroadcastProduct) {
  manual_seed(3);
  nn::GPT model(nn::GPTConfig{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16});
  Tensor idx = randint(0, 11, {2, 8}), tgt = randint(0, 11, {2, 8});
  model->forward(idx, tgt).second.backward();
  std::vector<ir::NodeRef> roots;
  for (auto& p : model->parameters()) roots.push_back(p.grad().node());
  auto sched = schedule::make_schedule(ir::rewrite_graph(roots));
  for (auto& k : sched.kernels) {
    int64_t read = 0;
    for (auto& in : k.inputs) read += in->numel();
    for (auto& out : k.outputs) EXPECT_LE(out->numel(), 2 * read + 1024) << codegen::kernel_name(k.ast);
  }
}

namespace {

// An ATTENTION node computing `part` of attention (ir/attention_layout.h) over realized operands.
ir::NodeRef attention_part(int64_t part, const std::vector<Tensor>& src, const Shape& shape, DType t) {
  std::vector<ir::NodeRef> nodes;
  for (auto& s : src) nodes.push_back(s.node());
  return ir::make(ir::Op::ATTENTION, t, shape, nodes, {1, part}, 0.125);
}

}  // namespace

// The forward's output and its log-sum-exp come out of one attention kernel (two outputs); the
// gradients' parts are kernels of their own. Scheduled and lowered for CUDA without a GPU.
TEST(Fusion, AttentionOutputAndLogSumExpAreOneKernel) {
  Tensor q = randn({2, 100, 64}).to(DType::BF16).realize(), k = randn({2, 100, 64}).to(DType::BF16).realize();
  Tensor dout = randn({2, 100, 64}).to(DType::BF16).realize(), delta = randn({2, 100}).realize();
  ir::NodeRef out = attention_part(0, {q, k, k}, {2, 100, 64}, DType::BF16),
              lse = attention_part(1, {q, k, k}, {2, 100}, DType::F32);
  ir::NodeRef dq = attention_part(2, {q, k, k, dout, Tensor(lse), delta}, {2, 100, 64}, DType::BF16);
  for (auto roots : {std::vector<ir::NodeRef>{out, lse, dq}, {lse, dq, out}}) {
    auto sched = schedule::make_schedule(roots);
    ASSERT_EQ(sched.kernels.size(), 2u);
    const schedule::Kernel& fwd = sched.kernels[0];
    ASSERT_EQ(fwd.outputs.size(), 2u) << "out and its log-sum-exp in one kernel";
    EXPECT_EQ(fwd.outputs[0], out);
    EXPECT_EQ(fwd.outputs[1], lse);
    EXPECT_EQ(sched.kernels[1].outputs, std::vector<ir::NodeRef>{dq});
    codegen::Lowered low = codegen::lower(fwd.ast, codegen::Target::CUDA, codegen::DeviceLimits{});
    EXPECT_EQ(low.program.globals, (std::vector<DType>{DType::BF16, DType::F32, DType::BF16, DType::BF16}));
    EXPECT_NE(low.source.find("STORE_O = true, STORE_LSE = true"), std::string::npos);
  }
}

// An optimizer's update: the moments and the parameter that reads them are one kernel with three
// outputs (the moments computed again where the parameter reads them), with the values of three.
TEST(Fusion, ElementwisePointsJoinTheKernelThatReadsThem) {
  Tensor g = randn({4, 5}).realize(), m0 = randn({4, 5}).realize(), v0 = rand({4, 5}).realize(),
         p0 = randn({4, 5}).realize();
  Tensor m = m0 * 0.9 + g * 0.1, v = v0 * 0.99 + g * g * 0.01;
  Tensor p = p0 - (m / (v.sqrt() + 1e-8)) * 0.01;
  auto sched = schedule::make_schedule(ir::rewrite_graph({m.node(), v.node(), p.node()}));
  ASSERT_EQ(sched.kernels.size(), 1u);
  EXPECT_EQ(sched.kernels[0].outputs.size(), 3u);
  EXPECT_EQ(sched.kernels[0].inputs.size(), 4u) << "g, m0, v0 and p0, each read once";
  realize({m, v, p});
  for (const Tensor* t : {&m, &v, &p}) EXPECT_TRUE(expect_matches_reference(*t));
  // a point with a reduce inside is not computed again: what reads it at its own index joins its
  // kernel and uses the value computed there; what reads it elsewhere is a kernel of its own
  Tensor x = randn({4, 5}).realize();
  Tensor sm = x.softmax(1), z = sm * 2.0, zt = sm.transpose(0, 1) * 2.0;
  auto roots = ir::rewrite_graph({sm.node(), z.node(), zt.node()});
  auto two = schedule::make_schedule(roots);
  int with_z = 0;
  for (auto& k : two.kernels) {
    bool has_sm = std::count(k.outputs.begin(), k.outputs.end(), roots[0]) > 0;
    bool has_z = std::count(k.outputs.begin(), k.outputs.end(), roots[1]) > 0;
    bool has_zt = std::count(k.outputs.begin(), k.outputs.end(), roots[2]) > 0;
    with_z += has_z;
    EXPECT_EQ(has_sm, has_z);
    if (has_zt) {
      EXPECT_EQ(k.outputs.size(), 1u);
    }
  }
  EXPECT_EQ(with_z, 1);
  realize({sm, z, zt});
  for (const Tensor* t : {&sm, &z, &zt}) EXPECT_TRUE(expect_matches_reference(*t));
}
