// nn::MultiheadAttention: q/k/v projections, per-head scaled dot products, optional causal mask,
// and the masked self-attention that writes into a static key/value cache (decoding).
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

F::AttentionOptions MultiheadAttentionImpl::attention_options() const {
  F::AttentionOptions o;
  o.dropout_p = is_training() ? dropout : 0.0;
  o.is_causal = causal;
  return o;
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x) const {
  detail::need_float("MultiheadAttention", x);
  if (x.dim() != 3 || x.size(2) != embed_dim)
    module_error("MultiheadAttention", "expected input of shape (B, T, " + std::to_string(embed_dim) +
                                           "), got " + shape_str(x.shape()));
  int64_t B = x.size(0), T = x.size(1), E = embed_dim, H = num_heads, D = E / H;
  auto qkv = in_proj(x).split(E, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor y =
      F::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), attention_options());
  return out_proj(y.transpose(1, 2).reshape({B, T, E}));
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x, const Tensor& mask, KVCache* cache,
                                       const Tensor& cols) const {
  detail::need_float("MultiheadAttention", x);
  if (x.dim() != 3 || x.size(2) != embed_dim)
    module_error("MultiheadAttention", "expected input of shape (B, T, " + std::to_string(embed_dim) +
                                           "), got " + shape_str(x.shape()));
  int64_t B = x.size(0), T = x.size(1), E = embed_dim, H = num_heads, D = E / H;
  if (cache) {
    for (const Tensor* c : {&cache->k, &cache->v})
      if (!c->defined() || c->dim() != 4 || c->size(0) != B || c->size(1) != H || c->size(3) != D ||
          c->size(2) < T)
        module_error("MultiheadAttention",
                     "expected cached keys and values of shape (" + std::to_string(B) + ", " +
                         std::to_string(H) + ", max_len >= " + std::to_string(T) + ", " + std::to_string(D) +
                         ") for input " + shape_str(x.shape()) + ", got " +
                         (c->defined() ? shape_str(c->shape()) : "an undefined tensor"));
    if (!mask.defined() || mask.dim() != 4 || mask.size(3) > cache->k.size(2))
      module_error("MultiheadAttention", "expected a mask (B, H, T, Tk) over at most the cache's " +
                                             std::to_string(cache->k.size(2)) + " columns, got " +
                                             (mask.defined() ? shape_str(mask.shape()) : "none"));
    if (!cols.defined() || cols.shape() != Shape{T} || !is_int(cols.dtype()))
      module_error("MultiheadAttention",
                   "expected integer cache columns of shape (" + std::to_string(T) + "), got " +
                       (cols.defined() ? to_string(cols.dtype()) + " " + shape_str(cols.shape()) : "none"));
  }
  auto qkv = in_proj(x).split(E, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  if (cache) {
    // columns cols[t] of the caches (B, H, max_len, D) get x[:, :, t]: stored in place, a step's
    // column and not the whole cache (index_copy_)
    cache->k.index_copy_(2, cols, k.to(cache->k.dtype()));
    cache->v.index_copy_(2, cols, v.to(cache->v.dtype()));
    k = cache->k, v = cache->v;
    // the filled prefix: the mask's columns, as symbolic as the mask's
    if (int64_t Tk = mask.size(3); Tk < k.size(2)) {
      k = k.slice(2, 0, Tk), v = v.slice(2, 0, Tk);
      if (std::optional<Var> len = mask.var_of(3)) k = k.symbolic(2, *len), v = v.symbolic(2, *len);
    }
  }
  F::AttentionOptions o = attention_options();
  o.is_causal = false;
  o.attn_mask = mask;
  Tensor y = F::scaled_dot_product_attention(q, k, v, o);
  return out_proj(y.transpose(1, 2).reshape({B, T, E}));
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
  Tensor y = F::scaled_dot_product_attention(project(query, 0, Tq), project(key, 1, Tk),
                                             project(value, 2, Tk), attention_options());
  return out_proj(y.transpose(1, 2).reshape({B, Tq, E}));
}

}  // namespace kiln::nn
