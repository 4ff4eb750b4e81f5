// nn::MultiheadAttention: q/k/v projections, per-head scaled dot-product attention
// (F::scaled_dot_product_attention, or its composite when the weights take dropout), optional causal mask.
#include <cmath>

#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "kiln/nn/transformer.h"
#include "nn/util.h"

namespace kiln::nn {

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t e, int64_t h, bool bias, bool causal, double dropout)
    : embed_dim(detail::positive("MultiheadAttention", "embed_dim", e)),
      num_heads(detail::positive("MultiheadAttention", "num_heads", h)),
      causal(causal),
      dropout(dropout) {
  if (e % h != 0)
    module_error("MultiheadAttention", "embed_dim (" + std::to_string(e) +
                                           ") must be divisible by num_heads (" + std::to_string(h) + ")");
  if (!(dropout >= 0 && dropout <= 1))
    module_error("MultiheadAttention", "dropout must be in [0, 1], got " + std::to_string(dropout));
  in_proj = register_module("in_proj", Linear(e, 3 * e, bias));
  out_proj = register_module("out_proj", Linear(e, e, bias));
  std::vector<Tensor> assigned{
      in_proj->weight.assign_(detail::fresh(init::xavier_uniform({3 * e, e}, e, 3 * e)))};
  if (bias) {
    assigned.push_back(in_proj->bias.assign_(detail::fresh(zeros({3 * e}))));
    assigned.push_back(out_proj->bias.assign_(detail::fresh(zeros({e}))));
  }
  realize(assigned);
}

// heads (B, H, Tq, D) attending over (B, H, Tk, D): one attention op, unless the weights take dropout
Tensor MultiheadAttentionImpl::attend(const Tensor& q, const Tensor& k, const Tensor& v) const {
  if (dropout == 0 || !is_training()) return F::scaled_dot_product_attention(q, k, v, {.is_causal = causal});
  Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (causal)
    att = att.masked_fill(ones({q.size(-2), k.size(-2)}, {.dtype = DType::Bool}).tril().logical_not(),
                          -INFINITY);
  return F::dropout(att.softmax(-1), dropout, true).matmul(v);
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x) const {
  detail::need_float("MultiheadAttention", x);
  if (x.dim() != 3 || x.size(2) != embed_dim)
    module_error("MultiheadAttention", "expected input of shape (B, T, " + std::to_string(embed_dim) +
                                           "), got " + shape_str(x.shape()));
  int64_t B = x.size(0), T = x.size(1), E = embed_dim, H = num_heads, D = E / H;
  auto qkv = in_proj(x).split(E, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  return out_proj(attend(q, k, v).transpose(1, 2).reshape({B, T, E}));
}

Tensor MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value) const {
  int64_t E = embed_dim, H = num_heads, D = E / H;
  for (const Tensor* t : {&query, &key, &value}) {
    detail::need_float("MultiheadAttention", *t);
    if (t->dim() != 3 || t->size(2) != E)
      module_error("MultiheadAttention", std::string("expected ") +
                                             (t == &query ? "query"
                                              : t == &key ? "key"
                                                          : "value") +
                                             " of shape (B, T, " + std::to_string(E) + "), got " +
                                             shape_str(t->shape()));
  }
  int64_t B = query.size(0), Tq = query.size(1), Tk = key.size(1);
  if (key.shape() != value.shape() || key.size(0) != B)
    module_error("MultiheadAttention", "key " + shape_str(key.shape()) + " and value " +
                                           shape_str(value.shape()) + " must have one shape with batch " +
                                           std::to_string(B) + " of query " + shape_str(query.shape()));
  auto w = in_proj->weight.split(E, 0);
  std::vector<Tensor> b(3);
  if (in_proj->bias.defined()) b = in_proj->bias.split(E, 0);
  auto project = [&](const Tensor& t, int i, int64_t T) {
    Tensor y = t.matmul(w[static_cast<size_t>(i)].t());
    if (b[static_cast<size_t>(i)].defined()) y = y + b[static_cast<size_t>(i)];
    return y.reshape({B, T, H, D}).transpose(1, 2);
  };
  Tensor q = project(query, 0, Tq), k = project(key, 1, Tk), v = project(value, 2, Tk);
  return out_proj(attend(q, k, v).transpose(1, 2).reshape({B, Tq, E}));
}

}  // namespace kiln::nn
