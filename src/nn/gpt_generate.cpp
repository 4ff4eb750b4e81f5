// nn::GPT::generate: autoregressive sampling over a static key/value cache (fixed shapes, so the
// decoding kernels compile once), top-k / top-p filtering, stop tokens and left-padded prompts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "frontend/graph.h"
#include "frontend/random.h"
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

// Each row's next token (B, 1) i64 from its logits (B, V), on the logits' device: divided by the
// temperature, the top_k largest kept, then drawn by the exponential race multinomial runs (the
// largest x - log E, E ~ Exp(1) from the draw `key`: the token softmax(x) draws). The k-th largest
// logit is found by search over the floats' order-preserving integer keys, 8 passes of 15 counts
// each, exact; no host round trip, so the captured decoding step draws its tokens too. A row with a
// NaN logit draws -1.
Tensor draw_tokens(const Tensor& logits, double temperature, std::optional<int64_t> top_k,
                   const Tensor& key) {
  const int64_t B = logits.size(0), V = logits.size(1);
  Tensor x = logits.to(DType::F32) / temperature;
  if (top_k && *top_k < V) {
    Tensor bits = Tensor(frontend::ewise(ir::Op::BITCAST, {x.node()}, DType::I32)).to(DType::I64);
    // negative floats order backwards as integers: flip their magnitude bits; then shift to [0, 2^32)
    Tensor ord =
        where(bits < 0, bits ^ full({}, Scalar(0x7fffffffLL), DType::I64), bits) + (int64_t{1} << 31);
    // count(ord >= lo) >= k > count(ord >= lo + 16 step); each pass counts at 15 points between and
    // moves lo to the last with k or more, until step is 1: lo is then the k-th largest key
    Tensor lo = zeros({B, 1}, {.dtype = DType::I64}), j = arange(1, 16).reshape({1, 15, 1});
    const Scalar k(static_cast<long long>(*top_k));
    for (int64_t step = int64_t{1} << 28; step >= 1; step /= 16) {
      Tensor at = lo.unsqueeze(1) + j * Scalar(static_cast<long long>(step));  // (B, 15, 1)
      Tensor counts = (ord.unsqueeze(1) >= at).to(DType::I64).sum(2);          // (B, 15)
      lo = lo + (counts >= k).to(DType::I64).sum(1, true) * Scalar(static_cast<long long>(step));
    }
    x = where(ord >= lo, x, -INFINITY);
  }
  // the scores in a buffer of their own: the argmax reads them twice (its max, then its index)
  Tensor score = (x - frontend::exponential({B, V}, key, 0).log()).contiguous();
  // (-1 for a NaN row: generate reports it when it reads the tokens and feeds 0 on meanwhile)
  return where((logits != logits).any({1}, true), full({}, Scalar(-1LL), DType::I64), score.argmax(1, true));
}

// A step's outputs: the logits (B, V), and the tokens drawn from them on the device unless top_p
// filters (its sort runs on the host).
std::vector<Tensor> step_outputs(const Tensor& logits, const Tensor& key, double temperature,
                                 std::optional<int64_t> top_k, bool device_draw) {
  if (!device_draw) return {logits};
  return {logits, draw_tokens(logits, temperature, top_k, key)};
}

// The parameters' nodes, where every one is a realized tensor (what a kept capture checks for
// changes: an eager optimizer step binds new buffers); else none.
std::vector<ir::NodeRef> parameter_nodes(const Module& m) {
  std::vector<ir::NodeRef> nodes;
  for (const Tensor& p : m.parameters()) {
    if (!frontend::is_buffer_node(*p.node())) return {};
    nodes.push_back(p.node());
  }
  return nodes;
}

}  // namespace

static std::mutex& kept_mu() {  // guards every model's generation_ and its busy flag
  static std::mutex mu;
  return mu;
}

// The caches and captured steps of one setting. The steps' functions read this object and the
// model through pointers (kept only while owner is the model and its parameters' nodes are these),
// and everything else they need by value: a later call runs them again while recording.
struct GPTImpl::Generation {
  const GPTImpl* owner = nullptr;
  std::string setting;
  std::vector<ir::NodeRef> params;
  std::vector<KVCache> caches;
  std::map<int64_t, Jit> prompt;  // by prompt length
  std::optional<Jit> decode;
  bool busy = false;  // a call is using it (another call at once makes its own)
};

void GPTImpl::train(bool on) {
  if (on) {
    std::lock_guard<std::mutex> lock(kept_mu());
    generation_.reset();  // a call running now keeps its own reference
  }
  Module::train(on);
}

Tensor GPTImpl::window_logits(const Tensor& idx, const Tensor& pad, const Tensor& cols,
                              std::vector<KVCache>* caches, const Tensor& keys) const {
  int64_t B = idx.size(0), T = idx.size(1);
  Tensor pos = (cols.reshape({1, T}) - pad.reshape({B, 1})).clamp(0.0);  // positions within each row
  // query t sees the keys up to its column that belong to its row; a padding column sees itself,
  // so no softmax row is empty
  Tensor j = keys.defined() ? keys.unsqueeze(0).unsqueeze(0).unsqueeze(0) : arange(T).reshape({1, 1, 1, T}),
         c = cols.reshape({1, 1, T, 1}), p = pad.reshape({B, 1, 1, 1});
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
  // Tokens are drawn on the device (draw_tokens) unless top_p filters: its sort runs on the host.
  const bool device_draw = !(o.top_p && *o.top_p < 1);
  const double temperature = o.temperature;
  const std::optional<int64_t> top_k = o.top_k;
  // The steps are captured (kiln::Jit) unless dropout is at work (its random draws differ from
  // call to call), and kept for the next call of this setting when every parameter is realized.
  const bool capture = o.jit && !(is_training() && config_.dropout > 0);
  std::vector<ir::NodeRef> params =
      capture && o.use_cache ? parameter_nodes(*this) : std::vector<ir::NodeRef>{};
  char setting[160];
  std::snprintf(setting, sizeof setting, "B%lld %s %s %a k%lld p%d t%d", static_cast<long long>(B),
                dev.str().c_str(), to_string(wte->weight.dtype()).c_str(), temperature,
                static_cast<long long>(top_k.value_or(-1)), device_draw ? 1 : 0, is_training() ? 1 : 0);
  std::shared_ptr<Generation> st;
  {
    std::lock_guard<std::mutex> lock(kept_mu());
    st = generation_;
    if (!st || st->owner != this || st->setting != setting || st->params != params || params.empty() ||
        st->busy) {
      st = std::make_shared<Generation>();
      st->owner = this, st->setting = setting, st->params = params;
      if (!generation_ || !generation_->busy)
        generation_ = params.empty() ? nullptr : st;  // replaces the last
    }
    st->busy = true;
  }
  struct Release {
    Generation* g;
    ~Release() {
      std::lock_guard<std::mutex> lock(kept_mu());
      g->busy = false;
    }
  } release{st.get()};
  std::vector<KVCache>& caches = st->caches;  // filled by the prompt, then one column per step
  // The one-token step with the cache and the draw, captured once two of its calls record the same
  // step (its second call) and replayed after that: the same launches (on CUDA one graph) each
  // token, with no graph to build or schedule; the draw's key and the padding are inputs. It
  // attends over the filled columns only, a symbolic length given by the shape of its input `keys`
  // (0, ..., T - 1), so one captured step serves every length.
  const Var filled("filled", 1, L);
  auto keys = [&](int64_t T) {
    std::vector<int64_t> v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; t++) v[static_cast<size_t>(t)] = t;
    return on_device(v, {T}, dev).symbolic(0, filled);
  };
  Generation* g_st = st.get();
  if (capture && !st->decode)
    st->decode.emplace([this, g_st, temperature, top_k, device_draw](const std::vector<Tensor>& in) {
      return step_outputs(window_logits(in[0].clamp(0.0), in[3], in[1], &g_st->caches, in[2]),
                          device_draw ? in[4] : Tensor(), temperature, top_k, device_draw);
    });
  // The prompt's step, one per prompt length, captured the same way (on its second call).
  auto prompt_step = [this, g_st, temperature, top_k, device_draw, dev](int64_t T) {
    return [this, g_st, temperature, top_k, device_draw, dev, T](const std::vector<Tensor>& in) {
      Tensor cols = arange(T, {.dtype = DType::I64, .device = dev});
      return step_outputs(window_logits(in[0], in[1], cols, &g_st->caches, cols),
                          device_draw ? in[2] : Tensor(), temperature, top_k, device_draw);
    };
  };
  // Drawn tokens not yet read back: reading them is a wait for the device, so they are read only
  // where the host needs them (the stop token, the window past block_size, the end).
  std::vector<Tensor> unread;
  std::vector<bool> done(static_cast<size_t>(B), false);
  auto read_tokens = [&] {
    for (const Tensor& t : unread) {
      auto next = t.to_vector<int64_t>();
      for (size_t i = 0; i < rows.size(); i++) {
        if (next[i] < 0) module_error("GPT", "generate: the logits of row " + std::to_string(i) + " are NaN");
        if (o.stop_token && done[i]) next[i] = *o.stop_token;
        if (o.stop_token && next[i] == *o.stop_token) done[i] = true;
        rows[i].push_back(next[i]);
      }
    }
    unread.clear();
  };
  Tensor last;  // the last drawn tokens (B, 1), on the device
  int64_t steps = 0;
  for (; steps < max_new_tokens; steps++) {
    if (o.stop_token) {
      read_tokens();
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    }
    const int64_t T = static_cast<int64_t>(rows[0].size() + unread.size());
    Tensor key = device_draw ? frontend::draw_key(g, B * V, 2, dev).realize() : Tensor();
    std::vector<Tensor> in;
    auto with_key = [&](std::vector<Tensor> v) {
      if (device_draw) v.push_back(key);
      return v;
    };
    std::vector<Tensor> outs;
    if (o.use_cache && T <= L && steps > 0) {  // one token at column T - 1
      Tensor col = on_device({T - 1}, {1}, dev);
      Tensor token = unread.empty() ? window(1) : last;
      in = with_key({token, col, keys(T), pad_t});
      outs = st->decode ? (*st->decode)(in)
                        : step_outputs(window_logits(in[0].clamp(0.0), pad_t, col, &caches, in[2]), key,
                                       temperature, top_k, device_draw);
    } else if (o.use_cache && T <= L) {  // the prompt fills columns [0, T)
      if (caches.empty()) {
        int64_t H = config_.n_head, D = config_.n_embd / H;
        // zeros in buffers of their own, so that the prompt's columns are stored in place too
        Tensor zero = zeros({B, H, L, D}, {.dtype = wte->weight.dtype(), .device = dev});
        for (size_t i = 0; i < h->size(); i++) caches.push_back({detail::fresh(zero), detail::fresh(zero)});
      }
      in = with_key({window(T), pad_t});
      if (capture) {
        auto it = st->prompt.find(T);
        if (it == st->prompt.end()) it = st->prompt.emplace(T, Jit(prompt_step(T))).first;
        outs = it->second(in);
      } else {
        outs = prompt_step(T)(in);
      }
    } else {  // the whole window again: the last W columns, fewer of them padding
      read_tokens();
      int64_t W = std::min(T, L), shift = T - W;
      std::vector<int64_t> p(pad.size());
      for (size_t b = 0; b < pad.size(); b++) p[b] = std::max<int64_t>(0, pad[b] - shift);
      outs = step_outputs(window_logits(window(W), on_device(p, {B}, dev),
                                        arange(W, {.dtype = DType::I64, .device = dev}), nullptr),
                          key, temperature, top_k, device_draw);
    }
    std::vector<Tensor> all = outs;
    for (auto& c : caches) all.insert(all.end(), {c.k, c.v});
    realize(all);  // the logits, the tokens and the caches' new values, one schedule
    const Tensor& logits = outs[0];
    if (o.on_logits) o.on_logits(logits);
    if (device_draw) {
      last = outs[1];
    } else {
      Tensor scaled = logits / o.temperature;
      auto thr = keep_thresholds(scaled.to(DType::F32).to_vector<float>(), B, V, o.top_k, o.top_p);
      Tensor thr_t = tensor(thr, {B, 1}).to(dev).to(scaled.dtype());
      scaled = scaled.masked_fill(scaled < thr_t, -INFINITY);
      last = multinomial(scaled.softmax(-1), 1, false, g).realize();
    }
    unread.push_back(last);
    if (o.on_token) {
      if (o.stop_token) read_tokens();  // the stopped rows' tokens replaced by the stop token
      o.on_token(o.stop_token ? window(1) : last);
    }
  }
  read_tokens();
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
