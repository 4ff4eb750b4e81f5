// Matmul recognition on kernel ASTs: the descriptor's fields for each way kiln writes a matmul, a
// check that the descriptor reads the kernel's buffers as the kernel does (a float64 GEMM over the
// matched strides against the realized result), and kernels that must not match.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <map>

#include "gemm_reference.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "ir/symbolic.h"
#include "runtime/buffer.h"
#include "schedule/match_matmul.h"

using namespace kiln;
using namespace kiln::testing;
using schedule::GemmDesc;
using schedule::GemmEpilogue;
using schedule::MatchedMatmul;

namespace {

std::vector<schedule::Kernel> kernels_of(const Tensor& t) {
  return schedule::make_schedule(ir::rewrite_graph({t.node()})).kernels;
}

// The single kernel computing t (inputs already realized), matched; fails the test when t takes
// several kernels or the kernel is not recognized.
std::optional<MatchedMatmul> match(const Tensor& t) {
  auto ks = kernels_of(t);
  EXPECT_EQ(ks.size(), 1u) << "expected one kernel";
  if (ks.size() != 1) return std::nullopt;
  return schedule::match_matmul(ks[0]);
}

// Runs the matched GEMM in float64 on the kernel's input buffers and compares with t realized.
void expect_same_values(const Tensor& t, const MatchedMatmul& m) {
  schedule::Kernel k = kernels_of(t).at(0);
  auto reader = [&](int input, int64_t offset) -> ElementReader {
    if (input < 0) return [](int64_t) { return 0.0; };
    std::shared_ptr<const Buffer> buf = on_host(k.inputs.at(static_cast<size_t>(input))->buffer);
    return [buf, offset](int64_t e) { return buf->get_f(offset + e); };
  };
  GemmReference want = reference_gemm(m.desc, reader(m.a_input, m.a_offset), reader(m.b_input, m.b_offset),
                                      reader(m.bias_input, m.bias_offset));
  std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.c.size());
  double rel = t.dtype() == DType::F32 ? 1e-5 : 1e-2;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; i++) {
    double tol = rel * (want.scale[i] + std::fabs(want.c[i])) + 1e-6;
    if (std::fabs(got[i] - want.c[i]) > tol) {
      ADD_FAILURE() << "element " << i << ": kernel " << got[i] << ", GEMM over the matched strides "
                    << want.c[i];
      bad++;
    }
  }
}

Tensor rnd(Shape s, DType t, uint64_t seed) { return random_tensor(s, t, -1, 1, seed); }

void expect_plain(const GemmDesc& d, int64_t m, int64_t n, int64_t k) {
  EXPECT_EQ(d.m, m);
  EXPECT_EQ(d.n, n);
  EXPECT_EQ(d.k, k);
  EXPECT_EQ(d.batch, 1);
  EXPECT_FALSE(d.allow_tf32);
}

}  // namespace

TEST(MatchMatmul, GeluTemplateIsOneKernel) {
  Tensor x = rnd({4, 8}, DType::F32, 1);
  EXPECT_EQ(kernels_of(x.gelu(true)).size(), 1u);
}

TEST(MatchMatmul, F32) {
  Tensor x = rnd({8, 16}, DType::F32, 1), w = rnd({16, 12}, DType::F32, 2);
  Tensor y = x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 8, 12, 16);
  EXPECT_FALSE(m->desc.trans_a);
  EXPECT_FALSE(m->desc.trans_b);
  EXPECT_EQ(m->desc.lda, 16);
  EXPECT_EQ(m->desc.ldb, 12);
  EXPECT_EQ(m->desc.ldc, 12);
  EXPECT_EQ(m->desc.a_type, DType::F32);
  EXPECT_EQ(m->desc.c_type, DType::F32);
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::None);
  EXPECT_EQ(m->a_input, 0);
  EXPECT_EQ(m->b_input, 1);
  EXPECT_EQ(m->bias_input, -1);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, BF16) {
  Tensor x = rnd({8, 16}, DType::BF16, 3), w = rnd({16, 12}, DType::BF16, 4);
  Tensor y = x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 8, 12, 16);
  EXPECT_EQ(m->desc.a_type, DType::BF16);
  EXPECT_EQ(m->desc.b_type, DType::BF16);
  EXPECT_EQ(m->desc.c_type, DType::BF16);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, F16InputsCastToF32) {
  Tensor x = rnd({8, 16}, DType::F16, 5), w = rnd({16, 12}, DType::F16, 6);
  Tensor y = x.to(DType::F32).matmul(w.to(DType::F32));
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.a_type, DType::F16);
  EXPECT_EQ(m->desc.c_type, DType::F32);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, TransposedB) {
  Tensor x = rnd({8, 16}, DType::F32, 7), w = rnd({12, 16}, DType::F32, 8);
  Tensor y = x.matmul(w.transpose(0, 1));
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 8, 12, 16);
  EXPECT_FALSE(m->desc.trans_a);
  EXPECT_TRUE(m->desc.trans_b);
  EXPECT_EQ(m->desc.ldb, 16);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, TransposedA) {
  Tensor x = rnd({16, 8}, DType::F32, 9), w = rnd({16, 12}, DType::F32, 10);
  Tensor y = x.transpose(0, 1).matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 8, 12, 16);
  EXPECT_TRUE(m->desc.trans_a);
  EXPECT_FALSE(m->desc.trans_b);
  EXPECT_EQ(m->desc.lda, 8);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, BothTransposed) {
  Tensor x = rnd({16, 8}, DType::BF16, 11), w = rnd({12, 16}, DType::BF16, 12);
  Tensor y = x.t().matmul(w.t());
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->desc.trans_a);
  EXPECT_TRUE(m->desc.trans_b);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, Batched) {
  Tensor x = rnd({3, 8, 16}, DType::F32, 13), w = rnd({3, 16, 12}, DType::F32, 14);
  Tensor y = x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.batch, 3);
  EXPECT_EQ(m->desc.m, 8);
  EXPECT_EQ(m->desc.n, 12);
  EXPECT_EQ(m->desc.k, 16);
  EXPECT_EQ(m->desc.stride_a, 8 * 16);
  EXPECT_EQ(m->desc.stride_b, 16 * 12);
  EXPECT_EQ(m->desc.stride_c, 8 * 12);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, SumOverSeveralDimsIsOneK) {
  // a Linear's weight gradient: x (B, T, C) and dy (B, T, N) summed over batch and time
  Tensor x = rnd({3, 5, 16}, DType::F32, 40), dy = rnd({3, 5, 12}, DType::F32, 41);
  Tensor dw = (x.unsqueeze(3) * dy.unsqueeze(2)).sum({0, 1});
  auto m = match(dw);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.m, 16);
  EXPECT_EQ(m->desc.n, 12);
  EXPECT_EQ(m->desc.k, 15);
  expect_same_values(dw, *m);
  // dims that do not nest in both operands are not one K
  Tensor xt = rnd({5, 3, 16}, DType::F32, 42).transpose(0, 1);
  EXPECT_FALSE(match((xt.unsqueeze(3) * dy.unsqueeze(2)).sum({0, 1})));
}

TEST(MatchMatmul, BatchedTransposedB) {  // attention scores: q k^T per head
  Tensor q = rnd({2, 3, 8, 16}, DType::BF16, 15), k = rnd({2, 3, 10, 16}, DType::BF16, 16);
  Tensor y = q.matmul(k.transpose(-1, -2));
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.batch, 6);
  EXPECT_TRUE(m->desc.trans_b);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, BroadcastWeightFoldsBatchIntoM) {
  Tensor x = rnd({3, 8, 16}, DType::F32, 17), w = rnd({16, 12}, DType::F32, 18);
  Tensor y = x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 24, 12, 16);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, BroadcastLeftOperandIsABatchWithStrideZero) {
  Tensor x = rnd({8, 16}, DType::F32, 19), w = rnd({3, 16, 12}, DType::F32, 20);
  Tensor y = x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.batch, 3);
  EXPECT_EQ(m->desc.stride_a, 0);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, SlicedOperandHasAnOffset) {
  Tensor x = rnd({8, 20}, DType::F32, 21), w = rnd({16, 12}, DType::F32, 22);
  Tensor y = x.narrow(1, 4, 16).matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->a_offset, 4);
  EXPECT_EQ(m->desc.lda, 20);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, LinearWithBias) {
  nn::Linear lin(16, 12);
  Tensor x = rnd({8, 16}, DType::F32, 23);
  Tensor y = lin->forward(x);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 8, 12, 16);
  EXPECT_TRUE(m->desc.trans_b);  // weight is (out, in)
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::Bias);
  EXPECT_GE(m->bias_input, 0);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, LinearGelu) {
  Tensor x = rnd({2, 8, 16}, DType::F32, 24), w = rnd({12, 16}, DType::F32, 25),
         b = rnd({12}, DType::F32, 26);
  Tensor y = (x.matmul(w.t()) + b).gelu(true);
  auto m = match(y);
  ASSERT_TRUE(m);
  expect_plain(m->desc, 16, 12, 16);
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::BiasGelu);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, LinearGeluBF16) {
  Tensor x = rnd({8, 16}, DType::BF16, 27), w = rnd({12, 16}, DType::BF16, 28),
         b = rnd({12}, DType::BF16, 29);
  Tensor y = (x.matmul(w.t()) + b).gelu(true);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::BiasGelu);
  EXPECT_EQ(m->desc.c_type, DType::BF16);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, GeluWithoutBias) {
  Tensor x = rnd({8, 16}, DType::F32, 30), w = rnd({16, 12}, DType::F32, 31);
  Tensor y = x.matmul(w).gelu(true);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::Gelu);
  EXPECT_EQ(m->bias_input, -1);
  expect_same_values(y, *m);
}

TEST(MatchMatmul, BiasFirstInTheSum) {
  Tensor x = rnd({8, 16}, DType::F32, 32), w = rnd({16, 12}, DType::F32, 33), b = rnd({12}, DType::F32, 34);
  Tensor y = b + x.matmul(w);
  auto m = match(y);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->desc.epilogue, GemmEpilogue::Bias);
  expect_same_values(y, *m);
}

// --- kernels that are not GEMMs ---

// A kernel with symbolic sizes matches at the values its tensors bind (the GEMM of this realize),
// and match_matmul_at gives its GEMM at any other values: a linear over (B, 8, 16) rows with B
// symbolic, its weight gradient summed over B and time (a symbolic K), and a batch of B matmuls.
TEST(MatchMatmul, SymbolicKernelsMatchAtEachBinding) {
  Var B("B", 1, 64);
  nn::Linear lin(16, 12);
  for (int64_t b : {3, 5}) {
    SCOPED_TRACE("B = " + std::to_string(b));
    Tensor x = rnd({b, 8, 16}, DType::F32, 60 + b).symbolic(0, B), dy = rnd({b, 8, 12}, DType::F32, 70 + b);
    dy = dy.symbolic(0, B);
    Tensor wb = rnd({b, 16, 12}, DType::F32, 80 + b).symbolic(0, B);
    struct Case {
      Tensor t;
      int64_t m, n, k, batch;
    };
    for (auto& c : std::vector<Case>{{lin->forward(x), b * 8, 12, 16, 1},
                                     {(x.unsqueeze(3) * dy.unsqueeze(2)).sum({0, 1}), 16, 12, b * 8, 1},
                                     {x.matmul(wb), 8, 12, 16, b}}) {
      auto ks = kernels_of(c.t);
      ASSERT_EQ(ks.size(), 1u);
      ASSERT_FALSE(ks[0].ast->arg.empty()) << "the kernel has symbolic sizes";
      auto m = schedule::match_matmul(ks[0]);
      ASSERT_TRUE(m);
      EXPECT_EQ(m->desc.m, c.m);
      EXPECT_EQ(m->desc.n, c.n);
      EXPECT_EQ(m->desc.k, c.k);
      EXPECT_EQ(m->desc.batch, c.batch);
      expect_same_values(c.t, *m);
      // the same AST at B = 40: the sizes and strides scale with it
      std::vector<ir::NodeRef> vars = ir::vars_of(ks[0].ast);
      ASSERT_EQ(vars.size(), 1u);
      auto at40 = schedule::match_matmul_at(ks[0].ast, 1, {{vars[0].get(), 40}});
      ASSERT_TRUE(at40);
      EXPECT_EQ(at40->desc.m * at40->desc.k * at40->desc.batch,
                m->desc.m * m->desc.k * m->desc.batch / b * 40);
      if (c.batch > 1) {
        EXPECT_EQ(at40->desc.batch, 40);
      }
      EXPECT_FALSE(schedule::match_matmul_at(ks[0].ast, 1, {}));  // no value for B: no GEMM
    }
  }
}

TEST(MatchMatmul, RejectsSum) {
  Tensor x = rnd({8, 16}, DType::F32, 40);
  for (auto& k : kernels_of(x.sum(1))) EXPECT_FALSE(schedule::match_matmul(k));
  for (auto& k : kernels_of((x * x).sum(1))) EXPECT_FALSE(schedule::match_matmul(k));  // row dot products
}

TEST(MatchMatmul, RejectsSoftmax) {
  Tensor x = rnd({8, 16}, DType::F32, 41);
  for (auto& k : kernels_of(x.softmax(1))) EXPECT_FALSE(schedule::match_matmul(k));
}

TEST(MatchMatmul, RejectsElementwise) {
  Tensor x = rnd({8, 16}, DType::F32, 42), y = rnd({8, 16}, DType::F32, 43);
  for (auto& k : kernels_of((x * y + 1).exp())) EXPECT_FALSE(schedule::match_matmul(k));
}

TEST(MatchMatmul, RejectsExtraWorkAfterTheMatmul) {
  Tensor x = rnd({8, 16}, DType::F32, 44), w = rnd({16, 12}, DType::F32, 45), b = rnd({12}, DType::F32, 46);
  Tensor full = rnd({8, 12}, DType::F32, 47);
  EXPECT_FALSE(match(x.matmul(w) * 2.0));
  EXPECT_FALSE(match(x.matmul(w) * full));
  EXPECT_FALSE(match(x.matmul(w) + full));             // not a bias along n
  EXPECT_FALSE(match(x.matmul(w).gelu(true) + b));     // bias after the activation
  EXPECT_FALSE(match((x.matmul(w) + b).relu()));       // no ReLU epilogue here
  EXPECT_FALSE(match((x.matmul(w) + b).gelu(false)));  // erf gelu is not cuBLASLt's
  EXPECT_FALSE(match((x.matmul(w) + b).gelu(true) * 2.0));
}

TEST(MatchMatmul, RejectsProductsThatAreNotMatmuls) {
  Tensor x = rnd({8, 16}, DType::F32, 48), w = rnd({16, 12}, DType::F32, 49);
  EXPECT_FALSE(match((x.unsqueeze(-1) * w.unsqueeze(0) * 2.0).sum(1)));  // three factors
  EXPECT_FALSE(match((x.exp().unsqueeze(-1) * w.unsqueeze(0)).sum(1)));  // an operand is computed
  EXPECT_FALSE(match(x.flip({1}).matmul(w)));                            // a negative stride
}

namespace {
// Kernels of a schedule for a device with a GEMM library: how many are large matmuls it runs.
int library_gemms(const std::vector<Tensor>& ts, bool library) {
  std::vector<ir::NodeRef> roots;
  for (auto& t : ts) roots.push_back(t.node());
  int n = 0;
  for (auto& k : schedule::make_schedule(ir::rewrite_graph(roots), {.library_gemm = library}).kernels)
    if (auto m = schedule::match_matmul(k); m && schedule::worth_library_gemm(m->desc)) n++;
  return n;
}
}  // namespace

TEST(MatchMatmul, LibraryGemmSplitsMatmulsOutOfFusedKernels) {
  // causal attention as a GPT block writes it: q, k and v are strided views of one projection, and
  // the scale, the mask and the softmax fuse with the matmuls; none is a plain GEMM
  int64_t B = 2, H = 4, T = 256, D = 64, C = H * D;
  Tensor qkv = random_tensor({B, T, 3 * C}, DType::F32, -1, 1, 1);
  qkv.requires_grad_();
  Tensor y = gpt_attention(qkv, H);
  Tensor dqkv = grad({y}, {qkv}, {random_tensor({B, T, C}, DType::F32, -1, 1, 2)})[0];
  EXPECT_EQ(library_gemms({y, dqkv}, false), 0);
  // with the library: the two forward matmuls and the four of the backward
  EXPECT_EQ(library_gemms({y, dqkv}, true), 6);
  // once the forward is computed, the graph it was computed from (with its autograd DETACH nodes)
  // is not planned again: the four backward matmuls and the scores, which the forward did not keep
  y.realize();
  EXPECT_EQ(library_gemms({dqkv}, true), 5);
  // an MLP whose input is normalized on the fly and whose output joins a residual
  Tensor x = random_tensor({512, 256}, DType::F32, -1, 1, 5),
         w1 = random_tensor({256, 1024}, DType::F32, -1, 1, 6),
         w2 = random_tensor({1024, 256}, DType::F32, -1, 1, 7);
  Tensor h = x + F::layer_norm(x, {256}).matmul(w1).relu().matmul(w2);
  EXPECT_EQ(library_gemms({h}, false), 0);  // relu is the first matmul's epilogue: not a plain GEMM
  EXPECT_EQ(library_gemms({h}, true), 2);
}

// Under bf16 autocast a Linear's backward multiplies f32 gradients rounded to bf16 (a round trip
// through f32 around the views): the library runs the forward and both backward matmuls.
TEST(MatchMatmul, AutocastLinearRunsItsBackwardInTheLibrary) {
  nn::Linear lin(256, 512);
  Tensor x = random_tensor({2, 128, 256}, DType::F32, -1, 1, 21);
  x.requires_grad_();
  Tensor y;
  {
    Autocast ac(DType::BF16);
    y = lin(x);
  }
  Tensor loss = (y.to(DType::F32) * random_tensor({2, 128, 512}, DType::F32, -1, 1, 22)).sum();
  std::vector<Tensor> g = grad({loss}, {lin->weight, x});
  EXPECT_EQ(library_gemms({y}, true), 1);
  EXPECT_EQ(library_gemms({g[0], g[1]}, true), 2);
  EXPECT_TRUE(expect_matches_reference(g[0], 2e-2, 2e-2));
}

TEST(MatchMatmul, LinearsAddTheirBiasInTheEpilogue) {
  // a linear over (batch, time, features), in f32 and under bf16 autocast: the sums plus the bias
  // (rounded once, in bf16) written by the GEMM
  nn::Linear lin(256, 512);
  Tensor x = random_tensor({2, 128, 256}, DType::F32, -1, 1, 23);
  for (bool autocast : {false, true}) {
    Tensor y;
    {
      Autocast ac(autocast ? std::optional<DType>(DType::BF16) : std::nullopt);
      y = lin(x);
    }
    DType want = autocast ? DType::BF16 : DType::F32;
    EXPECT_EQ(y.dtype(), want);
    int gemms = 0;
    for (auto& k : schedule::make_schedule(ir::rewrite_graph({y.node()}), {.library_gemm = true}).kernels)
      if (auto m = schedule::match_matmul(k); m && schedule::worth_library_gemm(m->desc)) {
        gemms++;
        EXPECT_EQ(m->desc.epilogue, GemmEpilogue::Bias) << autocast;
        EXPECT_EQ(m->desc.c_type, want);
      }
    EXPECT_EQ(gemms, 1) << autocast;
    EXPECT_TRUE(expect_matches_reference(y, autocast ? 1e-2 : 1e-4, autocast ? 1e-2 : 1e-4));
  }
}

// The library's plan over a graph with a symbolic batch: the matmul is split out of the relu and
// matched at this graph's binding, and kernels whose tensors only show B * 64 rows are planned too.
TEST(MatchMatmul, LibraryPlanOverASymbolicBatch) {
  // a GPT step's gradients: as many library matmuls with the batch dim symbolic as without
  nn::GPTConfig c{.vocab_size = 512,
                  .block_size = 128,
                  .n_layer = 1,
                  .n_head = 2,
                  .n_embd = 128,
                  .dropout = 0,
                  .bias = true};
  manual_seed(3);
  nn::GPT gpt(c);
  std::vector<int> counts;
  for (bool symbolic : {false, true}) {
    Tensor ids = randint(0, 512, {8, 128}).realize(), tgt = randint(0, 512, {8, 128}).realize();
    Var batch("B", 1, 16);
    if (symbolic) ids = ids.symbolic(0, batch), tgt = tgt.symbolic(0, batch);
    Tensor loss = gpt(ids, tgt).second;
    std::vector<Tensor> outs = grad({loss}, gpt->parameters());
    outs.push_back(loss);
    counts.push_back(library_gemms(outs, true));
  }
  EXPECT_GE(counts[0], 10);
  EXPECT_EQ(counts[1], counts[0]);
  Var B("B", 1, 64);
  Tensor w = random_tensor({256, 512}, DType::F32, -1, 1, 33);
  for (int64_t b : {16, 5}) {
    Tensor x = random_tensor({b, 64, 256}, DType::F32, -1, 1, 34 + b).symbolic(0, B);
    Tensor y = x.reshape({b * 64, 256}).matmul(w).relu();
    EXPECT_EQ(library_gemms({y}, true), 1) << "B = " << b;
  }
}

// --- a gelu and its gradient taken into the GEMM (GELU_AUX, DGELU) ---

namespace {

// A GPT MLP's first half under bf16 autocast, forward and backward: y = proj(gelu(fc(x))), with
// `hidden` features between the two linears and `tanh` choosing gelu's approximation.
struct Mlp {
  std::vector<Tensor> forward, backward;  // y; the gradients of fc's weight and bias and of x
};
Mlp gelu_mlp(int64_t hidden, bool tanh = true) {
  nn::Linear fc(256, hidden), proj(hidden, 256);
  Tensor x = random_tensor({2, 128, 256}, DType::F32, -1, 1, 31);
  x.requires_grad_();
  Tensor y;
  {
    Autocast ac(DType::BF16);
    y = proj(fc(x).gelu(tanh));
  }
  Tensor loss = (y.to(DType::F32) * random_tensor({2, 128, 256}, DType::F32, -1, 1, 32)).sum();
  return {{y}, grad({loss}, {fc->weight, fc->bias, x})};
}

std::vector<schedule::Kernel> library_kernels(const std::vector<Tensor>& ts) {
  std::vector<ir::NodeRef> roots;
  for (auto& t : ts) roots.push_back(t.node());
  return schedule::make_schedule(ir::rewrite_graph(roots), {.library_gemm = true}).kernels;
}

// The library GEMMs of a schedule by epilogue, each checked against the kernel it replaces: the
// float64 GEMM over the matched strides, on the kernel's inputs computed on the CPU, against its
// outputs computed there (C, and the aux matrix where the epilogue writes one).
std::map<GemmEpilogue, int> check_library_gemms(const std::vector<schedule::Kernel>& ks) {
  std::map<GemmEpilogue, int> count;
  for (const schedule::Kernel& k : ks) {
    auto m = schedule::match_matmul(k);
    if (!m || !schedule::worth_library_gemm(m->desc)) continue;
    count[m->desc.epilogue]++;
    auto reader = [&](int input, int64_t offset) -> ElementReader {
      if (input < 0) return [](int64_t) { return 0.0; };
      Tensor in(k.inputs.at(static_cast<size_t>(input)));
      std::shared_ptr<std::vector<double>> v = std::make_shared<std::vector<double>>(in.to_vector<double>());
      return [v, offset](int64_t e) { return v->at(static_cast<size_t>(offset + e)); };
    };
    GemmReference want =
        reference_gemm(m->desc, reader(m->a_input, m->a_offset), reader(m->b_input, m->b_offset),
                       reader(m->bias_input, m->bias_offset), reader(m->aux_input, m->aux_offset));
    auto compare = [&](int output, const std::vector<double>& expect, const char* what) {
      std::vector<double> got = Tensor(k.outputs.at(static_cast<size_t>(output))).to_vector<double>();
      ASSERT_EQ(got.size(), expect.size());
      int bad = 0;
      for (size_t i = 0; i < got.size() && bad < 5; i++)
        if (std::fabs(got[i] - expect[i]) > 2e-2 * (want.scale[i] + std::fabs(expect[i])) + 1e-3) {
          ADD_FAILURE() << what << " element " << i << ": kernel " << got[i]
                        << ", GEMM over the matched strides " << expect[i] << " (epilogue "
                        << static_cast<int>(m->desc.epilogue) << ")";
          bad++;
        }
    };
    compare(m->c_output, want.c, "C");
    if (m->aux_output >= 0) compare(m->aux_output, want.pre, "aux");
  }
  return count;
}

}  // namespace

// The fc layer of an MLP writes gelu(x w^T + b) and, as the aux matrix, x w^T + b for the backward:
// one kernel with both outputs; the backward's gradient through the gelu is the epilogue of the
// matmul by proj's weight, reading that aux matrix.
TEST(MatchMatmul, MlpGeluTakesItsPreActivationAndGradientIntoTheGemm) {
  Mlp mlp = gelu_mlp(1024);
  auto ks = library_kernels({mlp.forward[0], mlp.backward[0], mlp.backward[1], mlp.backward[2]});
  const schedule::Kernel* fwd = nullptr;
  const schedule::Kernel* bwd = nullptr;
  for (auto& k : ks)
    if (auto m = schedule::match_matmul(k)) {
      if (m->desc.epilogue == GemmEpilogue::BiasGeluAux) fwd = &k;
      if (m->desc.epilogue == GemmEpilogue::DGelu) bwd = &k;
    }
  ASSERT_TRUE(fwd) << "no GELU_AUX_BIAS GEMM";
  ASSERT_TRUE(bwd) << "no DGELU GEMM";
  auto f = *schedule::match_matmul(*fwd);
  ASSERT_EQ(fwd->outputs.size(), 2u);
  EXPECT_EQ(f.desc.m, 256);
  EXPECT_EQ(f.desc.n, 1024);
  EXPECT_EQ(f.desc.k, 256);
  EXPECT_EQ(f.desc.c_type, DType::BF16);
  EXPECT_EQ(f.desc.ld_aux, 1024);
  EXPECT_GE(f.bias_input, 0);
  EXPECT_EQ(f.c_output + f.aux_output, 1);
  ir::NodeRef h = fwd->outputs[static_cast<size_t>(f.aux_output)];
  auto b = *schedule::match_matmul(*bwd);
  EXPECT_EQ(b.desc.m, 256);
  EXPECT_EQ(b.desc.n, 1024);
  EXPECT_EQ(b.desc.k, 256);
  EXPECT_EQ(b.desc.ld_aux, 1024);
  EXPECT_EQ(b.bias_input, -1);
  ASSERT_GE(b.aux_input, 0);
  EXPECT_EQ(bwd->inputs[static_cast<size_t>(b.aux_input)], h);  // the backward reads what the forward kept
  // no kernel computes the gelu or its gradient alone, and every GEMM reads what its kernel does
  auto count = check_library_gemms(ks);
  EXPECT_EQ(count[GemmEpilogue::BiasGeluAux], 1);
  EXPECT_EQ(count[GemmEpilogue::DGelu], 1);
  EXPECT_EQ(count[GemmEpilogue::Bias], 1);  // proj
  EXPECT_EQ(count[GemmEpilogue::None], 2);  // the gradients of fc's weight and of x
  EXPECT_EQ(ks.size(), 14u);                // 16 with the gelu and its gradient in kernels of their own
}

TEST(MatchMatmul, ErfGeluStaysOutOfTheGemm) {
  Mlp mlp = gelu_mlp(1024, false);
  auto count = check_library_gemms(library_kernels({mlp.forward[0], mlp.backward[0], mlp.backward[2]}));
  EXPECT_EQ(count[GemmEpilogue::BiasGeluAux] + count[GemmEpilogue::DGelu] + count[GemmEpilogue::GeluAux], 0);
  EXPECT_EQ(count[GemmEpilogue::Bias], 2);
}

// cuBLASLt's aux matrix needs rows a multiple of 8 elements apart: 1020 features keep the gelu and
// its gradient in kernels of their own.
TEST(MatchMatmul, GeluAuxNeedsRowsAMultipleOf8Apart) {
  Mlp mlp = gelu_mlp(1020);
  auto count = check_library_gemms(library_kernels({mlp.forward[0], mlp.backward[0], mlp.backward[2]}));
  EXPECT_EQ(count[GemmEpilogue::BiasGeluAux] + count[GemmEpilogue::DGelu], 0);
  EXPECT_EQ(count[GemmEpilogue::Bias], 2);
}

// The pre-activation or the gelu read by other work as well: what is fused still computes what the
// kernels it replaces did, and the gradient through the gelu, summed with another, is no DGELU.
TEST(MatchMatmul, GeluWithOtherReadersFusesOnlyWhatItMay) {
  nn::Linear fc(256, 1024), proj(1024, 256);
  Tensor x = random_tensor({2, 128, 256}, DType::F32, -1, 1, 33);
  x.requires_grad_();
  Tensor y, h;
  {
    Autocast ac(DType::BF16);
    h = fc(x);
    y = proj(h.gelu(true));
  }
  Tensor r = random_tensor({2, 128, 256}, DType::F32, -1, 1, 34);
  Tensor loss = (y.to(DType::F32) * r).sum() + (h.to(DType::F32) * h.to(DType::F32)).sum();
  std::vector<Tensor> g = grad({loss}, {fc->weight, x});
  auto count = check_library_gemms(library_kernels({y, h * 2.0, g[0], g[1]}));
  EXPECT_EQ(count[GemmEpilogue::DGelu], 0);
}
