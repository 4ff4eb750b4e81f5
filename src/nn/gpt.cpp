// nn::GPT: GPT-2 forward, loss, initialization and parameter count (sampling: gpt_generate.cpp).
#include "kiln/nn/gpt.h"

#include <cmath>
#include <unordered_set>

#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "nn/util.h"

namespace kiln::nn {

int64_t GPTConfig::num_parameters() const {
  int64_t C = n_embd, b = bias ? 1 : 0;
  int64_t ln = C + b * C;
  int64_t block =
      2 * ln + (3 * C * C + b * 3 * C) + (C * C + b * C) + (4 * C * C + b * 4 * C) + (4 * C * C + b * C);
  return vocab_size * C + block_size * C + n_layer * block + ln;
}

GPTImpl::GPTImpl(GPTConfig c) : config_(c) {
  detail::positive("GPT", "vocab_size", c.vocab_size);
  detail::positive("GPT", "block_size", c.block_size);
  detail::positive("GPT", "n_layer", c.n_layer);
  detail::positive("GPT", "n_head", c.n_head);
  detail::positive("GPT", "n_embd", c.n_embd);
  if (c.n_embd % c.n_head != 0)
    module_error("GPT", "n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                            std::to_string(c.n_head) + ")");
  {
    // the layers' own defaults are not computed: every parameter is set below
    detail::DeferredInit deferred;
    wte = register_module("wte", Embedding(c.vocab_size, c.n_embd));
    wpe = register_module("wpe", Embedding(c.block_size, c.n_embd));
    drop = register_module("drop", Dropout(c.dropout));
    h = register_module("h", ModuleList());
    for (int64_t i = 0; i < c.n_layer; i++)
      h->push_back(TransformerBlock(c.n_embd, c.n_head, c.dropout, c.bias));
    ln_f = register_module("ln_f", LayerNorm(Shape{c.n_embd}, 1e-5, true, c.bias));
  }

  // GPT-2 initialization (the layers drew their defaults from the generator as before, so these
  // values are the ones drawn over computed defaults)
  double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  std::vector<std::pair<Tensor*, Tensor>> values;  // computed in one schedule, then copied
  auto set = [&](Tensor& p, const Tensor& v) { values.emplace_back(&p, v.detach().contiguous()); };
  auto linear = [&](const Linear& l, double stdev) {
    set(l->weight, init::normal(l->weight.shape(), 0, stdev));
    if (l->bias.defined()) set(l->bias, zeros(l->bias.shape()));
  };
  auto norm = [&](const LayerNorm& n) {
    set(n->weight, ones(n->weight.shape()));
    if (n->bias.defined()) set(n->bias, zeros(n->bias.shape()));
  };
  set(wte->weight, init::normal(wte->weight.shape(), 0, 0.02));
  set(wpe->weight, init::normal(wpe->weight.shape(), 0, 0.02));
  for (size_t i = 0; i < h->size(); i++) {
    auto blk = h->at<TransformerBlockImpl>(i);
    linear(blk->attn->in_proj, 0.02);
    linear(blk->attn->out_proj, residual_std);
    linear(blk->fc, 0.02);
    linear(blk->proj, residual_std);
    norm(blk->ln1);
    norm(blk->ln2);
  }
  norm(ln_f);
  std::unordered_set<const ir::Node*> set_ones;  // each parameter's own buffer node
  for (auto& [p, v] : values) set_ones.insert(p->node().get());
  for (const auto& [name, p] : named_parameters())
    if (!set_ones.count(p.node().get()))
      module_error("GPT",
                   "parameter " + name + " has no initial value (its layer's default was not computed)");
  std::vector<Tensor> all, assigned;
  for (auto& [p, v] : values) all.push_back(v);
  realize(all);
  for (auto& [p, v] : values) assigned.push_back(p->assign_(detail::fresh(v)));
  realize(assigned);
}

Tensor GPTImpl::forward(const Tensor& idx) const {
  if (idx.dim() != 2 || !is_int(idx.dtype()))
    module_error("GPT", "expected integer tokens of shape (B, T), got " + to_string(idx.dtype()) +
                            " of shape " + shape_str(idx.shape()));
  int64_t T = idx.size(1);
  if (T > config_.block_size || T == 0)
    module_error("GPT", "sequence length " + std::to_string(T) + " of input " + shape_str(idx.shape()) +
                            " must be in [1, block_size = " + std::to_string(config_.block_size) + "]");
  Tensor x = drop(wte(idx) + wpe(arange(T)));
  for (size_t i = 0; i < h->size(); i++) x = h->at<TransformerBlockImpl>(i)->forward(x);
  return ln_f(x).matmul(wte->weight.t());
}

std::pair<Tensor, Tensor> GPTImpl::forward(const Tensor& idx, const Tensor& targets) const {
  Tensor logits = forward(idx);
  if (targets.shape() != idx.shape() || !is_int(targets.dtype()))
    module_error("GPT", "expected integer targets of the shape of idx " + shape_str(idx.shape()) + ", got " +
                            to_string(targets.dtype()) + " of shape " + shape_str(targets.shape()));
  int64_t V = config_.vocab_size;
  Tensor loss = F::cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}), std::nullopt, -1);
  return {logits, loss};
}

}  // namespace kiln::nn
