// Attention and transformer layers: MultiheadAttention (batch-first, optional causal mask, an optional
// static key/value cache for decoding) and TransformerBlock (the pre-LayerNorm GPT-2 block).
#pragma once
#include "kiln/functional.h"
#include "kiln/nn/activation.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/norm.h"

namespace kiln::nn {

// One layer's static key/value cache for autoregressive decoding: k and v of shape
// (B, num_heads, max_len, head_dim), allocated once. A step writes its new columns by index_copy_
// (stored into the cache's buffer in place, where nothing else holds its old value), at columns
// given as tensor values, so shapes never change and every decoding step runs the same compiled
// kernels.
struct KVCache {
  Tensor k, v;
};

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
  // Self-attention of x (B, T, E) under `mask` (bool, broadcasting to (B, num_heads, T, Tk); true:
  // the key takes part; `causal` is not applied). Without a cache the keys are x's own (Tk = T).
  // With one, x's keys and values are first written into the cache's columns `cols` ((T,) i64, a
  // tensor: where they go is data, not shape) and the queries attend over the cache's first
  // Tk = mask.size(-1) columns (the filled prefix; a symbolic length where the mask's is, so one
  // set of kernels serves every length).
  Tensor forward(const Tensor& x, const Tensor& mask, KVCache* cache, const Tensor& cols) const;
  int64_t embed_dim, num_heads;
  bool causal;
  double dropout;
  Linear in_proj{nullptr}, out_proj{nullptr};

 private:
  F::AttentionOptions attention_options() const;  // causal, and dropout while training
};
KILN_MODULE(MultiheadAttention);

// x + attn(ln1(x)), then + mlp(ln2(.)), mlp = proj(gelu_tanh(fc(.))) with fc: C -> 4C, proj: 4C -> C;
// attention is causal; dropout on both residual branches (and the attention weights).
class TransformerBlockImpl : public Module {
 public:
  TransformerBlockImpl(int64_t n_embd, int64_t n_head, double dropout = 0, bool bias = true);
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)
  // The same with the attention's mask and optional cache (MultiheadAttention's masked forward).
  Tensor forward(const Tensor& x, const Tensor& mask, KVCache* cache, const Tensor& cols) const;
  LayerNorm ln1{nullptr};
  MultiheadAttention attn{nullptr};
  LayerNorm ln2{nullptr};
  Linear fc{nullptr}, proj{nullptr};
  Dropout drop{nullptr};
};
KILN_MODULE(TransformerBlock);

}  // namespace kiln::nn
