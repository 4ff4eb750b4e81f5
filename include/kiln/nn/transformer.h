// Attention and transformer layers: MultiheadAttention (batch-first, optional causal mask) and
// TransformerBlock (the pre-LayerNorm GPT-2 block).
#pragma once
#include "kiln/nn/activation.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/norm.h"

namespace kiln::nn {

// Scaled dot-product attention over num_heads heads of embed_dim / num_heads. in_proj is one
// Linear(E, 3E) holding the q, k and v projections (rows [0, E), [E, 2E), [2E, 3E)); out_proj is
// Linear(E, E). Init as PyTorch: xavier_uniform in_proj weight, zero biases. causal masks key
// j > query i. dropout applies to the attention weights in training mode.
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads, bool bias = true, bool causal = false,
                         double dropout = 0);
  Tensor forward(const Tensor& x) const;  // self-attention: x (B, T, E) -> (B, T, E)
  // query (B, Tq, E), key and value (B, Tk, E) -> (B, Tq, E)
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value) const;
  int64_t embed_dim, num_heads;
  bool causal;
  double dropout;
  Linear in_proj{nullptr}, out_proj{nullptr};

 private:
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) const;
};
KILN_MODULE(MultiheadAttention);

// x + attn(ln1(x)), then + mlp(ln2(.)), mlp = proj(gelu_tanh(fc(.))) with fc: C -> 4C, proj: 4C -> C;
// attention is causal; dropout on both residual branches (and the attention weights).
class TransformerBlockImpl : public Module {
 public:
  TransformerBlockImpl(int64_t n_embd, int64_t n_head, double dropout = 0, bool bias = true);
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)
  LayerNorm ln1{nullptr};
  MultiheadAttention attn{nullptr};
  LayerNorm ln2{nullptr};
  Linear fc{nullptr}, proj{nullptr};
  Dropout drop{nullptr};
};
KILN_MODULE(TransformerBlock);

}  // namespace kiln::nn
