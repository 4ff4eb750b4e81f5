// nn::GPT::generate: autoregressive sampling over a static key/value cache (fixed shapes, so the
// decoding kernels compile once), top-k / top-p filtering, stop tokens and left-padded prompts.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "kiln/jit.h"
#include "kiln/nn/gpt.h"
#include "nn/util.h"

namespace kiln::nn {

namespace {

Tensor on_device(const std::vector<int64_t>& v, Shape s, Device d) { return tensor(v, std::move(s)).to(d); }

// For each row of logits (B, V), the smallest logit that top_k and then top_p keep (-inf keeps all).
// On the host: kiln's topk and sort rank by comparing all pairs, O(V^2) per row.
std::vector<float> keep_thresholds(const std::vector<float>& logits, int64_t B, int64_t V,
                                   std::optional<int64_t> top_k, std::optional<double> top_p) {
  std::vector<float> thr(static_cast<size_t>(B), -INFINITY), row;
  for (int64_t b = 0; b < B; b++) {
    row.assign(logits.begin() + b * V, logits.begin() + (b + 1) * V);
    if (std::any_of(row.begin(), row.end(), [](float v) { return std::isnan(v); }))
      module_error("GPT", "generate: the logits of row " + std::to_string(b) + " are NaN");
    float& t = thr[static_cast<size_t>(b)];
    if (top_k && *top_k < V) {
      std::nth_element(row.begin(), row.begin() + (*top_k - 1), row.end(), std::greater<float>());
      t = row[static_cast<size_t>(*top_k - 1)];
    }
    if (!top_p || *top_p >= 1) continue;
    std::erase_if(row, [&](float v) { return v < t || v == -INFINITY; });  // what top_k kept
    std::sort(row.begin(), row.end(), std::greater<float>());
    double total = 0, sum = 0;
    for (float v : row) total += std::exp(static_cast<double>(v) - row[0]);
    for (float v : row) {  // the most likely tokens until their share reaches top_p
      sum += std::exp(static_cast<double>(v) - row[0]);
      t = v;
      if (sum >= *top_p * total) break;
    }
  }
  return thr;
}

}  // namespace

Tensor GPTImpl::window_logits(const Tensor& idx, const Tensor& pad, const Tensor& cols,
                              std::vector<KVCache>* caches) const {
  int64_t B = idx.size(0), T = idx.size(1), Tk = caches ? caches->front().k.size(2) : T;
  Tensor pos = (cols.reshape({1, T}) - pad.reshape({B, 1})).clamp(0.0);  // positions within each row
  // query t sees the keys up to its column that belong to its row; a padding column sees itself,
  // so no softmax row is empty
  Tensor j = arange(Tk).reshape({1, 1, 1, Tk}), c = cols.reshape({1, 1, T, 1}), p = pad.reshape({B, 1, 1, 1});
  Tensor mask = (j <= c) & ((j >= p) | (j == c));
  Tensor x = drop(wte(idx) + wpe(pos));
  for (size_t i = 0; i < h->size(); i++)
    x = h->at<TransformerBlockImpl>(i)->forward(x, mask, caches ? &(*caches)[i] : nullptr, cols);
  return ln_f(x.slice(1, T - 1, T)).matmul(wte->weight.t()).reshape({B, config_.vocab_size});
}

Tensor GPTImpl::generate(const Tensor& idx0, int64_t max_new_tokens, const GenerateOptions& o) const {
  if (idx0.dim() != 2 || !is_int(idx0.dtype()) || idx0.size(1) == 0)
    module_error("GPT", "generate: expected integer tokens of shape (B, T) with T >= 1, got " +
                            to_string(idx0.dtype()) + " of shape " + shape_str(idx0.shape()));
  const int64_t B = idx0.size(0), T0 = idx0.size(1), V = config_.vocab_size, L = config_.block_size;
  if (max_new_tokens < 0)
    module_error("GPT", "generate: max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  if (!(o.temperature > 0))
    module_error("GPT", "generate: temperature must be > 0, got " + std::to_string(o.temperature));
  if (o.top_k && *o.top_k <= 0)
    module_error("GPT", "generate: top_k must be > 0, got " + std::to_string(*o.top_k));
  if (o.top_p && !(*o.top_p > 0 && *o.top_p <= 1))
    module_error("GPT", "generate: top_p must be in (0, 1], got " + std::to_string(*o.top_p));
  if (o.stop_token && (*o.stop_token < 0 || *o.stop_token >= V))
    module_error("GPT", "generate: stop_token " + std::to_string(*o.stop_token) + " is not a token of the " +
                            std::to_string(V) + "-token vocabulary");
  std::vector<int64_t> pad(static_cast<size_t>(B), 0);
  if (!o.prompt_lengths.empty()) {
    if (static_cast<int64_t>(o.prompt_lengths.size()) != B)
      module_error("GPT", "generate: " + std::to_string(o.prompt_lengths.size()) +
                              " prompt_lengths for a batch of " + std::to_string(B) + " rows " +
                              shape_str(idx0.shape()));
    for (int64_t b = 0; b < B; b++) {
      int64_t n = o.prompt_lengths[static_cast<size_t>(b)];
      if (n < 1 || n > T0)
        module_error("GPT", "generate: prompt_lengths[" + std::to_string(b) + "] = " + std::to_string(n) +
                                " must be in [1, T = " + std::to_string(T0) + "] for idx " +
                                shape_str(idx0.shape()));
      pad[static_cast<size_t>(b)] = T0 - n;
    }
  }
  NoGradGuard no_grad;
  Generator& g = o.generator ? *o.generator : default_generator();
  const Device dev = wte->weight.device();
  // every row's tokens so far, padding included (B rows of T columns); read back each step
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(B));
  {
    auto v = idx0.to(DType::I64).to_vector<int64_t>();
    for (int64_t b = 0; b < B; b++)
      rows[static_cast<size_t>(b)].assign(v.begin() + b * T0, v.begin() + (b + 1) * T0);
  }
  // the last W columns of every row, as a (B, W) tensor on the model's device
  // (padding reads token 0, as any value may be there; a buffer from the host, so the embedding's
  // one-hot sum folds into one indexed load, which it does not over an index computed in the graph)
  auto window = [&](int64_t W) {
    std::vector<int64_t> v;
    for (size_t b = 0; b < rows.size(); b++)
      for (int64_t t = static_cast<int64_t>(rows[b].size()) - W; t < static_cast<int64_t>(rows[b].size());
           t++)
        v.push_back(t < pad[b] ? 0 : rows[b][static_cast<size_t>(t)]);
    return on_device(v, {B, W}, dev);
  };
  const Tensor pad_t = on_device(pad, {B}, dev);
  std::vector<KVCache> caches;  // filled by the first step (the prompt), then one column per step
  // The one-token step with the cache, captured once two of its calls record the same step (its
  // second call) and replayed after that: the same launches (on CUDA one graph) each token, with no
  // graph to build or schedule. Not with dropout at work: its random draws differ from call to call.
  std::optional<Jit> decode;
  if (!(is_training() && config_.dropout > 0))
    decode.emplace([&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{window_logits(in[0], pad_t, in[1], &caches)};
    });
  std::vector<bool> done(static_cast<size_t>(B), false);
  int64_t steps = 0;
  for (; steps < max_new_tokens; steps++) {
    if (o.stop_token && std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    const int64_t T = static_cast<int64_t>(rows[0].size());
    Tensor logits;
    std::vector<Tensor> outs;
    if (o.use_cache && T <= L && !caches.empty()) {  // one token at column T - 1
      Tensor token = window(1), col = on_device({T - 1}, {1}, dev);
      logits = decode ? (*decode)({token, col})[0] : window_logits(token, pad_t, col, &caches);
    } else if (o.use_cache && T <= L) {  // the prompt fills columns [0, T)
      int64_t H = config_.n_head, D = config_.n_embd / H;
      for (size_t i = 0; i < h->size(); i++) {
        TensorOptions to{.dtype = wte->weight.dtype(), .device = dev};
        caches.push_back({zeros({B, H, L, D}, to), zeros({B, H, L, D}, to)});
      }
      logits = window_logits(window(T), pad_t, arange(T, {.dtype = DType::I64, .device = dev}), &caches);
    } else {  // the whole window again: the last W columns, fewer of them padding
      int64_t W = std::min(T, L), shift = T - W;
      std::vector<int64_t> p(pad.size());
      for (size_t b = 0; b < pad.size(); b++) p[b] = std::max<int64_t>(0, pad[b] - shift);
      logits = window_logits(window(W), on_device(p, {B}, dev),
                             arange(W, {.dtype = DType::I64, .device = dev}), nullptr);
    }
    outs.push_back(logits);
    for (auto& c : caches) outs.insert(outs.end(), {c.k, c.v});
    realize(outs);  // the logits and the caches' new values, one schedule
    if (o.on_logits) o.on_logits(logits);

    Tensor scaled = logits / o.temperature;
    if ((o.top_k && *o.top_k < V) || (o.top_p && *o.top_p < 1)) {
      auto thr = keep_thresholds(scaled.to(DType::F32).to_vector<float>(), B, V, o.top_k, o.top_p);
      Tensor thr_t = tensor(thr, {B, 1}).to(dev).to(scaled.dtype());
      scaled = scaled.masked_fill(scaled < thr_t, -INFINITY);
    }
    auto next = multinomial(scaled.softmax(-1), 1, false, g).to_vector<int64_t>();
    for (int64_t b = 0; b < B; b++) {
      auto i = static_cast<size_t>(b);
      if (o.stop_token && done[i]) next[i] = *o.stop_token;
      if (o.stop_token && next[i] == *o.stop_token) done[i] = true;
      rows[i].push_back(next[i]);
    }
    if (o.on_token) o.on_token(on_device(next, {B, 1}, dev));
  }
  std::vector<int64_t> out;
  for (auto& r : rows) {
    out.insert(out.end(), r.begin(), r.end());
    out.insert(out.end(), static_cast<size_t>(max_new_tokens - steps), o.stop_token.value_or(0));
  }
  return tensor(out, {B, T0 + max_new_tokens}).to(idx0.device());
}

Tensor GPTImpl::generate(const Tensor& idx, int64_t max_new_tokens, double temperature,
                         std::optional<int64_t> top_k, Generator* gen,
                         const std::function<void(const Tensor&)>& on_token) const {
  return generate(idx, max_new_tokens,
                  {.temperature = temperature, .top_k = top_k, .generator = gen, .on_token = on_token});
}

}  // namespace kiln::nn
