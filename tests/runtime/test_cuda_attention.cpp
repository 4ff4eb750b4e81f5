// F::scaled_dot_product_attention on the GPU: the flash-attention kernel against the reference
// interpreter (f64) over tile-edge shapes, one launch reading strided heads in place, its
// gradients, and jit replays. Skipped (with the reason) where no GPU is usable.
#include <gtest/gtest.h>

#include <cmath>

#include "helpers.h"
#include "kiln/debug.h"
#include "kiln/functional.h"
#include "kiln/kiln.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;
namespace F = kiln::nn::functional;

namespace {

class CudaAttention : public kiln::testing::GpuTest {
 protected:
  Tensor on_gpu(const Shape& s, DType t, uint64_t seed) {
    return random_tensor(s, t, -1, 1, seed).to(gpu).realize();
  }
};

TEST_F(CudaAttention, FlashKernelMatchesTheReference) {
  struct Case {
    int64_t tq, tk, d;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 64},
                                         {17, 17, 64},
                                         {100, 100, 64},
                                         {1024, 1024, 64},
                                         {37, 100, 64},
                                         {100, 37, 64},
                                         {17, 17, 128},
                                         {100, 300, 128},
                                         {200, 129, 128}})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("Tq " + std::to_string(c.tq) + " Tk " + std::to_string(c.tk) + " D " +
                   std::to_string(c.d) + (causal ? " causal" : ""));
      int64_t b = c.tq == 1024 ? 1 : 2;
      Tensor q = on_gpu({b, 3, c.tq, c.d}, DType::BF16, 1), k = on_gpu({b, 3, c.tk, c.d}, DType::BF16, 2),
             v = on_gpu({b, 3, c.tk, c.d}, DType::BF16, 3);
      Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = causal});
      int64_t launches = stats().attention_launches, kernels = stats().kernels_run;
      auto graph = y.node();
      y.realize();
      EXPECT_EQ(stats().attention_launches - launches, 1);
      EXPECT_EQ(stats().kernels_run - kernels, 1) << "the attention kernel reads q, k and v in place";
      EXPECT_TRUE(expect_matches_reference(y, graph, 2e-2, 2e-2));
    }
}

TEST_F(CudaAttention, ReadsGptHeadsInPlace) {
  // q, k and v are (B, T, H, D) -> (B, H, T, D) views of one (B, T, 3C) projection: one kernel
  int64_t B = 2, T = 130, H = 4, D = 64, C = H * D;
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor qkv = on_gpu({B, T, 3 * C}, t, 4);
    auto head = [&](int64_t j) {
      return qkv.slice(2, j * C, (j + 1) * C).reshape({B, T, H, D}).transpose(1, 2);
    };
    Tensor y = F::scaled_dot_product_attention(head(0), head(1), head(2), {.is_causal = true});
    int64_t kernels = stats().kernels_run;
    auto graph = y.node();
    y.realize();
    EXPECT_EQ(stats().kernels_run - kernels, 1);
    EXPECT_TRUE(expect_matches_reference(y, graph, 2e-2, 2e-2));
  }
  // a view the kernel cannot stride (keys transposed twice over a flip) is copied first
  Tensor k = on_gpu({2, 64, 40}, DType::BF16, 5).flip({2}).transpose(1, 2);
  Tensor y = F::scaled_dot_product_attention(on_gpu({2, 33, 64}, DType::BF16, 6), k,
                                             on_gpu({2, 40, 64}, DType::BF16, 7));
  EXPECT_TRUE(expect_matches_reference(y, 2e-2, 2e-2));
}

// The backward kernels (dq; dk beside dv) after the forward with its log-sum-exp: three attention launches in
// all, over tile edges, both head dims, both 16-bit types, causal and not, Tq != Tk.
TEST_F(CudaAttention, Gradients) {
  struct Case {
    int64_t tq, tk, d;
    DType t;
    bool causal;
  };
  for (const Case& c : std::vector<Case>{{77, 77, 64, DType::BF16, true},
                                         {77, 77, 64, DType::BF16, false},
                                         {1, 1, 64, DType::BF16, true},
                                         {200, 130, 64, DType::F16, true},
                                         {130, 200, 64, DType::BF16, true},
                                         {129, 129, 128, DType::BF16, true},
                                         {100, 300, 128, DType::F16, false},
                                         {256, 256, 128, DType::BF16, true}}) {
    SCOPED_TRACE("Tq " + std::to_string(c.tq) + " Tk " + std::to_string(c.tk) + " D " + std::to_string(c.d) +
                 " " + to_string(c.t) + (c.causal ? " causal" : ""));
    int64_t B = 2, H = 2;
    Tensor q = on_gpu({B, H, c.tq, c.d}, c.t, 8), k = on_gpu({B, H, c.tk, c.d}, c.t, 9),
           v = on_gpu({B, H, c.tk, c.d}, c.t, 10), g = on_gpu({B, H, c.tq, c.d}, c.t, 11);
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
    Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = c.causal});
    std::vector<Tensor> d = grad({y}, {q, k, v}, {g});
    std::vector<std::shared_ptr<const ir::Node>> graphs;
    for (auto& t : d) graphs.push_back(t.node());
    int64_t launches = stats().attention_launches;
    realize({y, d[0], d[1], d[2]});
    EXPECT_EQ(stats().attention_launches - launches, 3) << "out with its log-sum-exp, dq, dk beside dv";
    for (size_t i = 0; i < 3; i++)
      EXPECT_TRUE(expect_matches_reference(d[i], graphs[i], 5e-2, 5e-2)) << "input " << i;
  }
}

// GPT's heads: q, k and v views of one projection, their gradients written back through the views
TEST_F(CudaAttention, GradientsOfGptHeads) {
  int64_t B = 2, T = 130, H = 4, D = 64, C = H * D;
  Tensor qkv = on_gpu({B, T, 3 * C}, DType::BF16, 12), g = on_gpu({B, H, T, D}, DType::BF16, 13);
  qkv.requires_grad_();
  auto head = [&](int64_t j) {
    return qkv.slice(2, j * C, (j + 1) * C).reshape({B, T, H, D}).transpose(1, 2);
  };
  Tensor y = F::scaled_dot_product_attention(head(0), head(1), head(2), {.is_causal = true});
  Tensor d = grad({y}, {qkv}, {g})[0];
  auto graph = d.node();
  d.realize();
  EXPECT_TRUE(expect_matches_reference(d, graph, 5e-2, 5e-2));
}

TEST_F(CudaAttention, JitReplays) {
  Tensor w = on_gpu({64, 64}, DType::BF16, 12);
  auto f = [&](const std::vector<Tensor>& in) {
    Tensor q = in[0].matmul(w);
    return std::vector<Tensor>{F::scaled_dot_product_attention(q, in[0], in[0], {.is_causal = true}) * 2.0};
  };
  Jit jitted(f);
  for (int i = 0; i < 5; i++) {
    Tensor x = on_gpu({3, 200, 64}, DType::BF16, 20 + static_cast<uint64_t>(i));
    std::vector<float> got = jitted({x})[0].to(DType::F32).to_vector<float>(),
                       want = f({x})[0].to(DType::F32).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t j = 0; j < got.size(); j++) bad += got[j] != want[j];
    EXPECT_EQ(bad, 0u) << "call " << i;
  }
  EXPECT_TRUE(jitted.captured());
}

}  // namespace
