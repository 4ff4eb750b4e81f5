// Recurrent layers (cells, multi-layer sequences, batch_first) and attention layers
// (MultiheadAttention, TransformerBlock): counts, values against loops, the functional GPT-2 block
// and the reference interpreter, causality, and gradients in float64.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"
#include "nn/nn_check.h"

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::expect_matches_reference;
using kiln::testing::expect_module_gradients;
using kiln::testing::expect_values;
using kiln::testing::parameter_names;
using kiln::testing::random_tensor;
using kiln::testing::set_parameters;
using Ts = std::vector<Tensor>;
using Names = std::vector<std::string>;

using kiln::testing::expect_same;
using kiln::testing::r;
using kiln::testing::r64;

namespace {
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return x.matmul(w.t()) + b; }

// the GPT-2 block of tests/frontend/test_models.cpp, written with functional ops (2 heads)
Tensor block(const Ts& p) {
  const Tensor& x = p[0];
  int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = 2, D = C / H;
  Tensor h = F::layer_norm(x, {C}, p[1], p[2]);
  auto qkv = linear(h, p[3], p[4]).split(C, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  Tensor causal = ones({T, T}, {.dtype = DType::Bool}).tril();
  att = att.masked_fill(causal.logical_not(), -INFINITY).softmax(-1);
  Tensor y = att.matmul(v).transpose(1, 2).reshape({B, T, C});
  Tensor x1 = x + linear(y, p[5], p[6]);
  Tensor m = linear(F::layer_norm(x1, {C}, p[7], p[8]), p[9], p[10]).gelu(true);
  return x1 + linear(m, p[11], p[12]);
}
}  // namespace

// ---------------------------------------------------------------- recurrent

TEST(NNRnn, ParameterCountsAndNames) {
  EXPECT_EQ(nn::RNNCell(10, 20)->num_parameters(), 640);
  EXPECT_EQ(nn::GRUCell(10, 20)->num_parameters(), 1920);
  EXPECT_EQ(nn::LSTMCell(10, 20)->num_parameters(), 2560);
  EXPECT_EQ(nn::LSTM(10, 20, nn::RNNOptions{.num_layers = 2})->num_parameters(), 5920);
  EXPECT_EQ(nn::GRU(10, 20, nn::RNNOptions{.num_layers = 3, .bias = false})->num_parameters(), 6600);
  EXPECT_EQ(parameter_names(*nn::LSTMCell(2, 3)), (Names{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
  EXPECT_EQ(parameter_names(*nn::RNN(2, 3, nn::RNNOptions{.num_layers = 2, .bias = false})),
            (Names{"weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"}));
  for (double v : nn::LSTM(10, 16)->weight_ih(0).to_vector<double>()) EXPECT_LE(std::fabs(v), 0.25);
}

TEST(NNRnn, CellsFollowTheirEquations) {
  Tensor x = r({2, 3}, 1), h = r({2, 4}, 2), c = r({2, 4}, 3);
  nn::RNNCell rc(3, 4);
  expect_same(rc(x, h),
              (linear(x, rc->weight_ih, rc->bias_ih) + linear(h, rc->weight_hh, rc->bias_hh)).tanh(), 1e-6);
  nn::RNNCell relu_cell(3, 4, true, "relu");
  EXPECT_GE(relu_cell(x).min().item<float>(), 0.0f);
  nn::GRUCell gc(3, 4);
  auto gi = linear(x, gc->weight_ih, gc->bias_ih).chunk(3, 1),
       gh = linear(h, gc->weight_hh, gc->bias_hh).chunk(3, 1);
  Tensor rg = (gi[0] + gh[0]).sigmoid(), z = (gi[1] + gh[1]).sigmoid(), n = (gi[2] + rg * gh[2]).tanh();
  expect_same(gc(x, h), (1.0 - z) * n + z * h, 1e-6);
  nn::LSTMCell lc(3, 4);
  auto g = (linear(x, lc->weight_ih, lc->bias_ih) + linear(h, lc->weight_hh, lc->bias_hh)).chunk(4, 1);
  Tensor c2 = g[1].sigmoid() * c + g[0].sigmoid() * g[2].tanh();
  auto [h_out, c_out] = lc(x, std::pair{h, c});
  expect_same(c_out, c2, 1e-6);
  expect_same(h_out, g[3].sigmoid() * c2.tanh(), 1e-6);
  // no state: zeros
  expect_same(lc(x).first, lc(x, std::pair{zeros({2, 4}), zeros({2, 4})}).first, 1e-7);
  expect_matches_reference(h_out, 1e-5, 1e-6);
}

TEST(NNRnn, MultiLayerSequencesMatchCellLoops) {
  nn::LSTM lstm(3, 4, nn::RNNOptions{.num_layers = 2});
  Tensor x = r({5, 2, 3}, 4);  // (T, B, C)
  auto [out, hc] = lstm(x);
  EXPECT_EQ(out.shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(hc.first.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(hc.second.shape(), (Shape{2, 2, 4}));
  // the same with two cells holding the layers' parameters
  nn::LSTMCell c0(3, 4), c1(4, 4);
  set_parameters(*c0, {lstm->weight_ih(0), lstm->weight_hh(0), lstm->bias_ih(0), lstm->bias_hh(0)});
  set_parameters(*c1, {lstm->weight_ih(1), lstm->weight_hh(1), lstm->bias_ih(1), lstm->bias_hh(1)});
  std::pair<Tensor, Tensor> s0{zeros({2, 4}), zeros({2, 4})}, s1 = s0;
  Ts outs;
  for (int64_t t = 0; t < 5; t++) {
    s0 = c0(x.index({t}), s0);
    s1 = c1(s0.first, s1);
    outs.push_back(s1.first);
  }
  expect_same(out, stack(outs), 1e-6);
  expect_same(hc.first, stack({s0.first, s1.first}), 1e-6);
  expect_same(hc.second, stack({s0.second, s1.second}), 1e-6);
  expect_matches_reference(out, 1e-5, 1e-6);
  // batch_first and initial states
  nn::GRU gru(3, 4, nn::RNNOptions{.batch_first = true});
  Tensor xb = x.transpose(0, 1), h0 = r({1, 2, 4}, 5);
  auto [ob, hb] = gru(xb, h0);
  EXPECT_EQ(ob.shape(), (Shape{2, 5, 4}));
  nn::GRUCell gc(3, 4);
  set_parameters(*gc, gru->parameters());
  Tensor hh = h0.index({0});
  for (int64_t t = 0; t < 5; t++) hh = gc(x.index({t}), hh);
  expect_same(hb.index({0}), hh, 1e-6);
  expect_same(ob.index({Slice(), 4}), hh, 1e-6);
  nn::RNN rnn(3, 4, nn::RNNOptions{.num_layers = 2, .nonlinearity = "relu"});
  EXPECT_EQ(rnn(x).first.shape(), (Shape{5, 2, 4}));
  expect_error([&] { lstm(xb.reshape({10, 3})); }, {"LSTM", "(T, B, 3)", "got (10, 3)"});
  expect_error([&] { gru(xb, r({2, 2, 4}, 1)); }, {"GRU", "h0 of shape (1, 2, 4)", "got (2, 2, 4)"});
  expect_error([&] { nn::LSTMCell(3, 4)(x); }, {"LSTMCell", "(B, 3)", "(5, 2, 3)"});
}

TEST(NNRnn, LSTMCellGradients) {
  nn::LSTMCell cell(2, 3);
  cell->to(DType::F64);
  expect_module_gradients(
      *cell, {r64({2, 2}, 6), r64({2, 3}, 7), r64({2, 3}, 8)},
      [&](const Ts& in) {
        auto [h, c] = cell(in[0], std::pair{in[1], in[2]});
        return cat({h, c}, 1);
      },
      43);
}

// ---------------------------------------------------------------- attention

TEST(NNAttention, MultiheadAttentionShapesCountsAndCausality) {
  nn::MultiheadAttention mha(16, 4);
  EXPECT_EQ(mha->num_parameters(), 1088);  // torch.nn.MultiheadAttention(16, 4)
  EXPECT_EQ(parameter_names(*mha),
            (Names{"in_proj.weight", "in_proj.bias", "out_proj.weight", "out_proj.bias"}));
  expect_values(mha->in_proj->bias, std::vector<double>(48, 0.0));
  for (double v : mha->in_proj->weight.to_vector<double>()) EXPECT_LE(std::fabs(v), std::sqrt(6.0 / 64));
  Tensor x = r({2, 5, 16}, 9);
  Tensor y = mha(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 16}));
  expect_matches_reference(y, 1e-5, 1e-5);
  expect_same(mha(x, x, x), y, 1e-6);  // self-attention through the general form
  Tensor kv = r({2, 7, 16}, 10);
  EXPECT_EQ(mha(x, kv, kv).shape(), (Shape{2, 5, 16}));
  // causal: outputs before the last position ignore the last input
  nn::MultiheadAttention causal(8, 2, true, true);
  Tensor a = r({1, 4, 8}, 11);
  Tensor b = cat({a.slice(1, 0, 3), r({1, 1, 8}, 12)}, 1);
  Tensor ya = causal(a), yb = causal(b);
  expect_same(ya.slice(1, 0, 3), yb.slice(1, 0, 3), 1e-6);
  EXPECT_GT((ya.slice(1, 3, 4) - yb.slice(1, 3, 4)).abs().max().item<float>(), 1e-4f);
  expect_error([&] { mha(r({2, 5, 8}, 1)); }, {"MultiheadAttention", "(B, T, 16)", "got (2, 5, 8)"});
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"embed_dim (10) must be divisible by num_heads (3)"});
}

TEST(NNAttention, TransformerBlockReproducesTheFunctionalBlock) {
  nn::TransformerBlock blk(8, 2);
  EXPECT_EQ(parameter_names(*blk),
            (Names{"ln1.weight", "ln1.bias", "attn.in_proj.weight", "attn.in_proj.bias",
                   "attn.out_proj.weight", "attn.out_proj.bias", "ln2.weight", "ln2.bias", "fc.weight",
                   "fc.bias", "proj.weight", "proj.bias"}));
  EXPECT_EQ(nn::TransformerBlock(768, 12)->num_parameters(), 7087872);  // a GPT-2 small block
  blk->to(DType::F64);
  int64_t C = 8;
  Ts p{r64({2, 4, C}, 10),       r64({C}, 11),          r64({C}, 12),
       r64({3 * C, C}, 13, 0.4), r64({3 * C}, 14, 0.1), r64({C, C}, 15, 0.4),
       r64({C}, 16, 0.1),        r64({C}, 17),          r64({C}, 18),
       r64({4 * C, C}, 19, 0.4), r64({4 * C}, 20, 0.1), r64({C, 4 * C}, 21, 0.3),
       r64({C}, 22, 0.1)};
  set_parameters(*blk, Ts(p.begin() + 1, p.end()));
  Tensor got = blk(p[0]);
  expect_matches_reference(got, 1e-9, 1e-12);
  expect_same(got, block(p), 1e-12);
  expect_error([&] { blk(r64({2, 4, 6}, 1)); }, {"TransformerBlock", "(B, T, 8)", "got (2, 4, 6)"});
}

TEST(NNGrad, AttentionAndBlockGradients) {
  nn::MultiheadAttention mha(4, 2, true, true);
  mha->to(DType::F64);
  expect_module_gradients(
      *mha, {r64({1, 3, 4}, 23)}, [&](const Ts& in) { return mha(in[0]); }, 44);
  nn::TransformerBlock blk(4, 2);
  blk->to(DType::F64);
  expect_module_gradients(
      *blk, {r64({1, 3, 4}, 24)}, [&](const Ts& in) { return blk(in[0]); }, 45);
}
