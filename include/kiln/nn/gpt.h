// nn::GPT: the GPT-2 architecture (token + position embeddings, pre-LN transformer blocks, final
// LayerNorm, lm_head tied to the token embedding), its loss and autoregressive sampling.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/container.h"
#include "kiln/nn/transformer.h"

namespace kiln::nn {

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;  // longest context
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  double dropout = 0;
  bool bias = true;  // in Linear and LayerNorm layers
  // The number of parameters of a GPT with this config, lm_head tied (124,439,808 for GPT-2 small),
  // computed without building it.
  int64_t num_parameters() const;
};

// How GPT::generate draws tokens. Per step: the last logits are divided by temperature, tokens
// outside the top_k largest and then outside the top_p nucleus are dropped, and one token per row is
// drawn from the softmax of the rest with multinomial (generator, or the global generator).
struct GenerateOptions {
  double temperature = 1;
  std::optional<int64_t> top_k = std::nullopt;  // keep the k largest logits (1: greedy)
  // Keep the smallest set of most likely tokens whose probability (after top_k) sums to >= top_p,
  // in (0, 1]; tokens tied with the least likely kept one are kept too.
  std::optional<double> top_p = std::nullopt;
  // A row that draws stop_token stops there: its later tokens are stop_token. Once every row has
  // stopped, generation ends (no more on_token calls; the result is still padded to full length).
  std::optional<int64_t> stop_token = std::nullopt;
  // Prompts of different lengths: row b's prompt is its last prompt_lengths[b] tokens (left
  // padding; the values before are ignored and returned unchanged). Empty: every row is a whole
  // prompt. Each row then draws what it would draw alone (up to rounding).
  std::vector<int64_t> prompt_lengths = {};
  // Decode with a static key/value cache (one forward over the prompt, then one token per step
  // at fixed shapes: no new kernels as the context grows). false: every step recomputes the whole
  // context (the reference the cache is tested against).
  bool use_cache = true;
  // Replay the one-token step with the cache as a captured kiln::Jit step from its third call on.
  // false: every step goes through the realize driver (the reference the replays are tested against).
  bool jit = true;
  Generator* generator = nullptr;
  std::function<void(const Tensor&)> on_token = nullptr;   // each step's tokens (B, 1) i64, realized
  std::function<void(const Tensor&)> on_logits = nullptr;  // each step's last logits (B, V), realized
};

// Parameters: wte.weight, wpe.weight, h.<i>.(ln1, attn.in_proj, attn.out_proj, ln2, fc, proj).*,
// ln_f.*; the lm_head is wte.weight (the same Tensor, listed once). GPT-2 init: N(0, 0.02) for
// Linear and Embedding weights, N(0, 0.02 / sqrt(2 n_layer)) for the residual projections
// (attn.out_proj, proj), zero biases, LayerNorm ones and zeros.
class GPTImpl : public Module {
 public:
  explicit GPTImpl(GPTConfig config);
  // idx (B, T) integer tokens, T <= block_size -> logits (B, T, vocab_size)
  Tensor forward(const Tensor& idx) const;
  // -> (logits, mean cross entropy of logits against targets (B, T); targets equal to -1 are ignored)
  std::pair<Tensor, Tensor> forward(const Tensor& idx, const Tensor& targets) const;
  // Appends max_new_tokens sampled tokens to idx (B, T) and returns (B, T + max_new_tokens) i64.
  // Each token sees the last block_size tokens of its row (as forward on them would). With the
  // cache (options.use_cache), a forward over the prompt (compiled once per prompt length) fills
  // a cache of block_size columns per layer, then each step runs one token through the model at
  // tensor-valued positions: the same kernels every step, replayed as one captured step (kiln::Jit)
  // from the third token on unless dropout is at work. The caches and the captured steps are kept
  // for the next call of the same batch size, sampling, device and dtype (the prompt's step per
  // prompt length, captured on its second call): it replays them from its first token, until a
  // parameter's tensor changes (an eager optimizer step) or the setting does. Once a row's context passes
  // block_size the window slides: each later step recomputes the whole (B, block_size) window (one more set
  // of kernels, then fixed). Runs under NoGradGuard and realizes each step; the mode (train/eval)
  // is the caller's. Sampling, stop tokens, padded prompts and streaming: GenerateOptions.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& options) const;
  // generate with options {temperature, top_k, gen, on_token}.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1,
                  std::optional<int64_t> top_k = std::nullopt, Generator* gen = nullptr,
                  const std::function<void(const Tensor&)>& on_token = nullptr) const;
  // Module::train; switching to training also lets go of what generate keeps (its captures hold the
  // parameters' buffers, which training replaces).
  void train(bool on = true) override;
  const GPTConfig& config() const { return config_; }
  const Tensor& lm_head_weight() const { return wte->weight; }

  Embedding wte{nullptr}, wpe{nullptr};
  Dropout drop{nullptr};
  ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};

 private:
  // The last column's logits (B, V) of tokens idx (B, T) (padding holding valid ids), whose rows
  // are left-padded by pad ((B,) i64) and sit at window columns cols ((T,) i64); keys are idx's
  // own, or with caches the cache's columns `keys` ((Tk,) i64: 0, 1, ..., Tk - 1, the filled
  // prefix; symbolic while decoding).
  Tensor window_logits(const Tensor& idx, const Tensor& pad, const Tensor& cols, std::vector<KVCache>* caches,
                       const Tensor& keys = {}) const;
  GPTConfig config_;
  // What generate keeps between calls of one setting (src/nn/gpt_generate.cpp): the caches and the
  // captured prompt and decoding steps.
  struct Generation;
  mutable std::shared_ptr<Generation> generation_;
};
KILN_MODULE(GPT);

// GPT-2 weights written by other programs (src/nn/gpt_weights.cpp).
// A Hugging Face GPT-2 safetensors file into `model`, whose config must match it: the names
// ("h.0.attn.c_attn.weight", with or without a "transformer." prefix) are mapped to kiln's, the
// Conv1D weights, stored (in, out), transposed; the causal-mask buffers and the tied lm_head are
// skipped; values take the model's dtype.
void load_gpt2_safetensors(GPT& model, const std::string& path);
// An llm.c checkpoint (a 256-int header: magic 20240326, version 3 for f32 or 5 for bf16, then
// max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size; the parameters in
// llm.c's order) as a new f32 model with vocab_size tokens (the padding rows are dropped).
GPT load_llmc_checkpoint(const std::string& path);

}  // namespace kiln::nn
