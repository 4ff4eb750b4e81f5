// nn::TransformerBlock: the pre-LayerNorm GPT-2 block (causal attention and a GELU MLP, each on a
// residual branch).
#include "kiln/nn/transformer.h"
#include "nn/util.h"

namespace kiln::nn {

TransformerBlockImpl::TransformerBlockImpl(int64_t n_embd, int64_t n_head, double dropout, bool bias) {
  detail::positive("TransformerBlock", "n_embd", n_embd);
  ln1 = register_module("ln1", LayerNorm(Shape{n_embd}, 1e-5, true, bias));
  attn = register_module("attn", MultiheadAttention(n_embd, n_head, bias, true, dropout));
  ln2 = register_module("ln2", LayerNorm(Shape{n_embd}, 1e-5, true, bias));
  fc = register_module("fc", Linear(n_embd, 4 * n_embd, bias));
  proj = register_module("proj", Linear(4 * n_embd, n_embd, bias));
  drop = register_module("drop", Dropout(dropout));
}

namespace {
void check_input(const TransformerBlockImpl& b, const Tensor& x) {
  int64_t C = b.attn->embed_dim;
  if (x.dim() != 3 || x.size(2) != C)
    module_error("TransformerBlock",
                 "expected input of shape (B, T, " + std::to_string(C) + "), got " + shape_str(x.shape()));
}
}  // namespace

Tensor TransformerBlockImpl::forward(const Tensor& x) const {
  check_input(*this, x);
  Tensor h = x + drop(attn(ln1(x)));
  return h + drop(proj(fc(ln2(h)).gelu(true)));
}

Tensor TransformerBlockImpl::forward(const Tensor& x, const Tensor& mask, KVCache* cache,
                                     const Tensor& cols) const {
  check_input(*this, x);
  Tensor h = x + drop(attn->forward(ln1(x), mask, cache, cols));
  return h + drop(proj(fc(ln2(h)).gelu(true)));
}

}  // namespace kiln::nn
