// F::scaled_dot_product_attention with masks and dropout (the composite path of
// src/frontend/attention.cpp): against the formula written out and the reference interpreter, edge
// sizes, gradients, errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::expect_gradients_match;
using testing::expect_matches_reference;
using testing::random_tensor;
using Ts = std::vector<Tensor>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Tensor r(const Shape& s, uint64_t seed, DType t = DType::F32) { return random_tensor(s, t, -1, 1, seed); }

// softmax(q k^T * scale + bias) v, written out
Tensor written_out(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias) {
  double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return (q.matmul(k.transpose(-2, -1)) * scale + bias).softmax(-1).matmul(v);
}

TEST(AttentionMasks, MatchesTheFormulaAndTheReference) {
  Tensor q = r({2, 3, 5, 8}, 1), k = r({2, 3, 7, 8}, 2), v = r({2, 3, 7, 4}, 3);
  Tensor y = F::scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(y.shape(), Shape({2, 3, 5, 4}));
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-6));
  auto got = y.to_vector<double>(), want = written_out(q, k, v, zeros({5, 7})).to_vector<double>();
  for (size_t i = 0; i < got.size(); i++) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
  // an explicit scale
  Tensor s = F::scaled_dot_product_attention(q, k, v, {.scale = 0.5});
  Tensor ws = (q.matmul(k.transpose(-2, -1)) * 0.5).softmax(-1).matmul(v);
  auto gs = s.to_vector<double>(), es = ws.to_vector<double>();
  for (size_t i = 0; i < gs.size(); i++) ASSERT_NEAR(gs[i], es[i], 1e-5) << i;
}

TEST(AttentionMasks, CausalAndMasks) {
  // causal with more keys than queries: query i sees keys 0..i (top-left aligned)
  Tensor q = r({2, 5, 8}, 4), k = r({2, 7, 8}, 5), v = r({2, 7, 3}, 6);
  Tensor i = arange(5).unsqueeze(1), j = arange(7).unsqueeze(0);
  Tensor causal_bias = where(j <= i, zeros({5, 7}), kNegInf);
  Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-6));
  auto got = y.to_vector<double>(), want = written_out(q, k, v, causal_bias).to_vector<double>();
  for (size_t n = 0; n < got.size(); n++) ASSERT_NEAR(got[n], want[n], 1e-5) << n;
  // the first query sees only the first key: its output is that key's value
  auto first = y.slice(1, 0, 1).to_vector<double>(), v0 = v.slice(1, 0, 1).to_vector<double>();
  for (size_t n = 0; n < first.size(); n++) EXPECT_NEAR(first[n], v0[n], 1e-6);
  // a bool mask (true: takes part) and a float mask (added), broadcast over the batch
  Tensor keep = j != i + 1;  // every query keeps some keys
  Tensor yb = F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep});
  auto gb = yb.to_vector<double>(),
       wb = written_out(q, k, v, where(keep, zeros({5, 7}), kNegInf)).to_vector<double>();
  for (size_t n = 0; n < gb.size(); n++) ASSERT_NEAR(gb[n], wb[n], 1e-5) << n;
  Tensor add = r({5, 7}, 7);
  Tensor yf = F::scaled_dot_product_attention(q, k, v, {.attn_mask = add});
  auto gf = yf.to_vector<double>(), wf = written_out(q, k, v, add).to_vector<double>();
  for (size_t n = 0; n < gf.size(); n++) ASSERT_NEAR(gf[n], wf[n], 1e-5) << n;
  // dropout of every weight leaves nothing
  EXPECT_EQ(F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}).abs().sum().item<float>(), 0.f);
}

TEST(AttentionMasks, BroadcastBatchAndEdgeSizes) {
  // batch dims broadcast: one query set against 3 heads of keys
  Tensor q = r({1, 4, 8}, 8), k = r({3, 6, 8}, 9), v = r({3, 6, 2}, 10);
  Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  EXPECT_EQ(y.shape(), Shape({3, 4, 2}));
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-6));
  // one query, one key: the output is the value
  Tensor one = F::scaled_dot_product_attention(r({2, 1, 4}, 11), r({2, 1, 4}, 12), r({2, 1, 3}, 13));
  EXPECT_TRUE(expect_matches_reference(one, 1e-6, 1e-6));
  // an empty batch
  Tensor e = F::scaled_dot_product_attention(r({0, 5, 8}, 14), r({0, 7, 8}, 15), r({0, 7, 3}, 16));
  EXPECT_EQ(e.shape(), Shape({0, 5, 3}));
  EXPECT_EQ(e.realize().numel(), 0);
}

TEST(AttentionMasks, GradientsMatchFiniteDifferences) {
  auto d = [](const Shape& s, uint64_t seed) { return r(s, seed, DType::F64); };
  expect_gradients_match([](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2]); },
                         {d({2, 3, 4}, 20), d({2, 5, 4}, 21), d({2, 5, 3}, 22)}, 20);
  expect_gradients_match(
      [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true}); },
      {d({2, 4, 4}, 23), d({2, 4, 4}, 24), d({2, 4, 2}, 25)}, 23);
}

TEST(AttentionMasks, BadInputIsAnError) {
  Tensor q = r({2, 5, 8}, 30), k = r({2, 7, 8}, 31), v = r({2, 7, 3}, 32);
  std::string m = error_of([&] { F::scaled_dot_product_attention(r({8}, 33), k, v); });
  EXPECT_NE(m.find("scaled_dot_product_attention"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2 or more"), std::string::npos) << m;
  m = error_of([&] { F::scaled_dot_product_attention(q, r({2, 7, 6}, 34), v); });
  EXPECT_NE(m.find("one last dim D"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 7, 6)"), std::string::npos) << m;
  m = error_of([&] { F::scaled_dot_product_attention(q, k, r({2, 6, 3}, 35)); });
  EXPECT_NE(m.find("one sequence length Tk"), std::string::npos) << m;
  m = error_of([&] { F::scaled_dot_product_attention(q, k.to(DType::F64), v); });
  EXPECT_NE(m.find("dtype"), std::string::npos) << m;
  EXPECT_NE(m.find("f64"), std::string::npos) << m;
  m = error_of([&] {
    F::scaled_dot_product_attention(q, k, v, {.attn_mask = ones({5, 7}), .is_causal = true});
  });
  EXPECT_NE(m.find("not both"), std::string::npos) << m;
  m = error_of([&] { F::scaled_dot_product_attention(q, k, v, {.attn_mask = arange(35).reshape({5, 7})}); });
  EXPECT_NE(m.find("attn_mask must be bool or floating-point"), std::string::npos) << m;
  m = error_of([&] { F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}); });
  EXPECT_NE(m.find("dropout_p"), std::string::npos) << m;
}

}  // namespace
}  // namespace kiln
