// nn::GPT: the GPT-2 architecture (token + position embeddings, pre-LN transformer blocks, final
// LayerNorm, lm_head tied to the token embedding), its loss and autoregressive sampling.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>

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
  // Appends max_new_tokens sampled tokens to idx (B, T): each step feeds the last block_size tokens,
  // divides the last logits by temperature, keeps the top_k largest (if given), and draws from the
  // softmax with multinomial (gen, or the global generator). Runs under NoGradGuard and realizes
  // each step; the mode (train/eval) is the caller's. Returns (B, T + max_new_tokens) i64.
  // `on_token`, if given, is called after each step with that step's tokens (B, 1), realized, so a
  // caller can show them as they come.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1,
                  std::optional<int64_t> top_k = std::nullopt, Generator* gen = nullptr,
                  const std::function<void(const Tensor&)>& on_token = nullptr) const;
  const GPTConfig& config() const { return config_; }
  const Tensor& lm_head_weight() const { return wte->weight; }

  Embedding wte{nullptr}, wpe{nullptr};
  Dropout drop{nullptr};
  ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};

 private:
  GPTConfig config_;
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
