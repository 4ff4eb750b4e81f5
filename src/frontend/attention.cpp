// scaled_dot_product_attention with PyTorch's semantics, as a composite of tensor ops: scores
// q k^T * scale, masked, softmax over the keys, dropout, times v.
#include <cmath>
#include <limits>

#include "frontend/graph.h"
#include "kiln/functional.h"

namespace kiln::nn::functional {

using frontend::fail;

namespace {

std::string describe(const char* name, const Tensor& t) {
  return std::string(name) + " " + shape_str(t.shape()) + " " + to_string(t.dtype()) + " on " +
         t.device().str();
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& o) {
  const char* op = "scaled_dot_product_attention";
  std::string all = describe("query", q) + ", " + describe("key", k) + ", " + describe("value", v);
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    fail(op, "query, key and value must have at least 2 dims (..., L, E); got " + all);
  if (!is_float(q.dtype()) || q.dtype() != k.dtype() || q.dtype() != v.dtype())
    fail(op, "query, key and value must share one floating-point dtype; got " + all);
  if (q.size(-1) != k.size(-1)) fail(op, "query and key must have the same last dim (E); got " + all);
  if (k.size(-2) != v.size(-2)) fail(op, "key and value must have the same length (S); got " + all);
  if (o.is_causal && o.attn_mask) fail(op, "give is_causal or attn_mask, not both");
  if (!(o.dropout_p >= 0 && o.dropout_p <= 1)) fail(op, "dropout_p must be in [0, 1]");
  int64_t L = q.size(-2), S = k.size(-2);
  double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor att = q.matmul(k.transpose(-2, -1)) * scale;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  if (o.is_causal) {  // query i sees keys 0..i (the top-left aligned lower triangle)
    Tensor i = arange(L), j = arange(S);
    att = where(j.unsqueeze(0) <= i.unsqueeze(1), att, kNegInf);
  } else if (o.attn_mask) {
    const Tensor& m = *o.attn_mask;
    if (m.dtype() == DType::Bool)
      att = where(m, att, kNegInf);  // true: the key takes part
    else if (is_float(m.dtype()))
      att = att + m.to(att.dtype());
    else
      fail(op, "attn_mask must be bool or floating-point, got " + describe("attn_mask", m));
  }
  att = att.softmax(-1);
  if (o.dropout_p > 0) att = dropout(att, o.dropout_p, true);
  return att.matmul(v);
}

}  // namespace kiln::nn::functional
