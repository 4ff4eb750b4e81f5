// F::scaled_dot_product_attention: one ATTENTION node in the graph where the flash-attention kernel
// runs, with its gradient; elsewhere (and with a mask or dropout) the composite of primitive ops, so
// that autograd differentiates the composite and its backward reuses the forward's probabilities.
#include "frontend/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "codegen/flash_attention.h"
#include "engine/runners.h"
#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "ir/attention_layout.h"
#include "ir/graph_rewrite.h"
#include "ir/rewrite.h"
#include "kiln/functional.h"

namespace kiln {

namespace {

using ir::AttentionPart;
using ir::NodeRef;

// q k^T * scale with the causal mask (-inf above the diagonal)
Tensor attention_scores(const Tensor& q, const Tensor& k, bool causal, double scale) {
  Tensor att = q.matmul(k.transpose(-2, -1)) * scale;
  if (causal) {
    int64_t tq = q.size(-2), tk = k.size(-2);
    att = att.masked_fill(ones({tq, tk}, {.dtype = DType::Bool}).tril().logical_not(), -INFINITY);
  }
  return att;
}

// softmax(q k^T * scale) with the causal mask: what the forward composite and the backward share
Tensor attention_probs(const Tensor& q, const Tensor& k, bool causal, double scale) {
  return attention_scores(q, k, causal, scale).softmax(-1);
}

std::string describe(const Tensor& t) {
  return shape_str(t.shape()) + " " + to_string(t.dtype()) + " on " + t.device().str();
}

// The ATTENTION node computing `part` of attention over q, k, v (, dO, lse, delta) (ir/attention_layout.h).
NodeRef attention_node(AttentionPart part, const std::vector<NodeRef>& src, bool causal, double scale) {
  const NodeRef &q = src[0], &k = src[1], &v = src[2];
  Shape s(q->shape.begin(), q->shape.end() - 2);
  int64_t tq = q->shape.end()[-2], tk = k->shape.end()[-2], d = q->shape.back(), dv = v->shape.back();
  switch (part) {
    case AttentionPart::Out: s.insert(s.end(), {tq, dv}); break;
    case AttentionPart::Lse: s.push_back(tq); break;
    case AttentionPart::Dq: s.insert(s.end(), {tq, d}); break;
    case AttentionPart::Dkv: s.insert(s.end(), {tk, d + dv}); break;
  }
  DType t = part == AttentionPart::Lse ? DType::F32 : q->dtype;
  return ir::make(ir::Op::ATTENTION, t, s, src, {causal ? 1 : 0, static_cast<int64_t>(part)}, scale);
}

// The part of attention the node n computes, from primitive ops; the gradients' math in f32.
Tensor part_composite(const NodeRef& n) {
  Tensor q(n->src[0]), k(n->src[1]), v(n->src[2]);
  bool causal = n->arg[0] != 0;
  double scale = n->fval;
  AttentionPart part = ir::attention_part(n->arg);
  if (part == AttentionPart::Out) return frontend::attention_composite(q, k, v, causal, scale);
  DType wide = q.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor qf = q.to(wide), kf = k.to(wide);
  if (part == AttentionPart::Lse) return attention_scores(qf, kf, causal, scale).logsumexp({-1}).to(n->dtype);
  Tensor vf = v.to(wide), dof = Tensor(n->src[3]).to(wide), lse = Tensor(n->src[4]).to(wide),
         delta = Tensor(n->src[5]).to(wide);
  Tensor p = (attention_scores(qf, kf, causal, scale) - lse.unsqueeze(-1)).exp();
  Tensor ds = p * (dof.matmul(vf.transpose(-2, -1)) - delta.unsqueeze(-1));
  if (part == AttentionPart::Dq) return (ds.matmul(kf) * scale).to(n->dtype);
  return cat({ds.transpose(-2, -1).matmul(qf) * scale, p.transpose(-2, -1).matmul(dof)}, -1).to(n->dtype);
}

}  // namespace

namespace frontend {

Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  return attention_probs(q, k, causal, scale).matmul(v);
}

// Where the kernels run: the forward's log-sum-exp and delta = rowsum(dO * out), then the kernels of
// dq and of dk beside dv, which recompute the probabilities tile by tile. Elsewhere the composite's
// backward: the probabilities recomputed, then softmax's own backward.
std::vector<std::optional<Tensor>> attention_backward(const NodeRef& n, const Tensor& g) {
  if (ir::attention_part(n->arg) != AttentionPart::Out)
    throw Error("kiln.autograd: attention's backward kernels have no gradient of their own (" + n->str() +
                ")");
  Tensor q(n->src[0]), k(n->src[1]), v(n->src[2]);
  bool causal = n->arg[0] != 0;
  double scale = n->fval;
  NodeRef lse = attention_node(AttentionPart::Lse, n->src, causal, scale);
  if (attention_kernel_runs(n) && attention_kernel_runs(lse)) {
    Tensor go = g.to(q.dtype()), delta = (go.to(DType::F32) * Tensor(n).to(DType::F32)).sum(-1);
    std::vector<NodeRef> src{n->src[0], n->src[1], n->src[2], go.node(), lse, delta.node()};
    NodeRef dq = attention_node(AttentionPart::Dq, src, causal, scale),
            dkv = attention_node(AttentionPart::Dkv, src, causal, scale);
    if (attention_kernel_runs(dq) && attention_kernel_runs(dkv)) {
      int64_t d = q.size(-1);
      Tensor both(dkv);
      return {Tensor(dq), both.narrow(-1, 0, d), both.narrow(-1, d, v.size(-1))};
    }
  }
  Tensor p = attention_probs(q, k, causal, scale);
  Tensor dp = g.matmul(v.transpose(-2, -1));
  Tensor ds = p * (dp - (dp * p).sum(-1, true));
  return {ds.matmul(k) * scale, ds.transpose(-2, -1).matmul(q) * scale, p.transpose(-2, -1).matmul(g)};
}

// The kernel's own limits first: asking the runners sets up the device's backend.
bool attention_kernel_runs(const NodeRef& n) {
  return codegen::flash_attention_fits(*n) && engine::node_runs(*n);  // the flash-attention runner's
}

NodeRef lower_attention(const NodeRef& n) {
  Autocast plain(std::nullopt);  // the composite computes in the node's dtype, whatever scope realizes it
  if (attention_kernel_runs(n)) return nullptr;
  return part_composite(n).node();
}

// the graph rewrites lower ATTENTION nodes with it; registered as the program starts, by the file
// that makes ATTENTION nodes
[[maybe_unused]] const bool lowering_registered =
    (ir::set_lowering(ir::Op::ATTENTION, &lower_attention), true);

}  // namespace frontend

namespace nn::functional {

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options) {
  if (frontend::AutocastOp ac{frontend::AutocastList::Lower})
    return scaled_dot_product_attention(ac(query), ac(key), ac(value), options);
  const std::string op = "scaled_dot_product_attention";
  for (const Tensor* t : {&query, &key, &value})
    if (!t->defined()) frontend::fail(op, "query, key and value must be defined tensors");
  auto all = [&] {
    return "query " + describe(query) + ", key " + describe(key) + ", value " + describe(value);
  };
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2)
    frontend::fail(
        op,
        "needs query (..., Tq, D), key (..., Tk, D) and value (..., Tk, Dv) of rank 2 or more; got " + all());
  if (!is_float(query.dtype()) || query.dtype() != key.dtype() || query.dtype() != value.dtype())
    frontend::fail(op, "query, key and value must have one floating-point dtype; got " + all());
  auto dq = frontend::own_device(query), dk = frontend::own_device(key), dv = frontend::own_device(value);
  if ((dq && dk && *dq != *dk) || (dq && dv && *dq != *dv) || (dk && dv && *dk != *dv))
    frontend::fail(op,
                   "query, key and value must be on one device; got " + all() + " (move them with .to())");
  if (query.size(-1) != key.size(-1))
    frontend::fail(op, "query and key must have one last dim D; got " + all());
  if (key.size(-2) != value.size(-2))
    frontend::fail(op, "key and value must have one sequence length Tk (dim -2); got " + all());
  // batch dims broadcast as in matmul
  size_t rank = static_cast<size_t>(std::max({query.dim(), key.dim(), value.dim()}));
  Shape batch(rank - 2, 1);
  for (const Tensor* t : {&query, &key, &value})
    for (size_t i = 0; i + 2 < static_cast<size_t>(t->dim()); i++) {
      int64_t s = t->shape()[i], &b = batch[rank - static_cast<size_t>(t->dim()) + i];
      if (s != b && s != 1 && b != 1)
        frontend::fail(op, "the batch dims of query, key and value do not broadcast; got " + all());
      if (s != 1) b = s;
    }
  if (options.is_causal && options.attn_mask) frontend::fail(op, "give is_causal or attn_mask, not both");
  if (!(options.dropout_p >= 0 && options.dropout_p <= 1))
    frontend::fail(op, "dropout_p must be in [0, 1], got " + std::to_string(options.dropout_p));
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  if (options.attn_mask || options.dropout_p > 0) {  // the composite, with the mask and the dropout
    Tensor att = query.matmul(key.transpose(-2, -1)) * scale;
    if (options.attn_mask) {
      const Tensor& m = *options.attn_mask;
      if (m.dtype() == DType::Bool)
        att = where(m, att, -INFINITY);  // true: the key takes part
      else if (is_float(m.dtype()))
        att = att + m.to(att.dtype());
      else
        frontend::fail(op, "attn_mask must be bool or floating-point, got " + describe(m));
    }
    att = att.softmax(-1);
    if (options.dropout_p > 0) att = dropout(att, options.dropout_p, true);
    return att.matmul(value);
  }
  auto expand = [&](const Tensor& t) {
    Shape s = batch;
    s.insert(s.end(), {t.size(-2), t.size(-1)});
    return frontend::expand(t.node(), s);
  };
  ir::NodeRef node = attention_node(ir::AttentionPart::Out, {expand(query), expand(key), expand(value)},
                                    options.is_causal, scale);
  if (!frontend::attention_kernel_runs(node))
    return frontend::attention_composite(Tensor(node->src[0]), Tensor(node->src[1]), Tensor(node->src[2]),
                                         options.is_causal, scale);
  return Tensor(node);
}

}  // namespace nn::functional

}  // namespace kiln
