// GPT-2 weights written by other programs: Hugging Face safetensors and llm.c checkpoints (see
// kiln/nn/gpt.h).
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "data/io.h"
#include "kiln/io.h"
#include "kiln/nn/gpt.h"

namespace kiln::nn {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error("kiln::nn::GPT: " + path + ": " + why);
}

// A Hugging Face GPT-2 name (without "transformer.") -> kiln's name and whether the tensor is a
// Conv1D weight, stored (in, out) where kiln's Linear keeps (out, in). Empty: not a parameter.
std::pair<std::string, bool> kiln_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kBlock[] = {{"ln_1.", "ln1."},
                                                               {"ln_2.", "ln2."},
                                                               {"attn.c_attn.", "attn.in_proj."},
                                                               {"attn.c_proj.", "attn.out_proj."},
                                                               {"mlp.c_fc.", "fc."},
                                                               {"mlp.c_proj.", "proj."}};
  if (hf == "wte.weight" || hf == "wpe.weight" || hf == "ln_f.weight" || hf == "ln_f.bias")
    return {hf, false};
  if (hf.rfind("h.", 0) != 0) return {"", false};
  size_t dot = hf.find('.', 2);
  if (dot == std::string::npos) return {"", false};
  std::string layer = hf.substr(0, dot + 1), rest = hf.substr(dot + 1);
  for (auto& [from, to] : kBlock)
    if (rest.rfind(from, 0) == 0) {
      std::string leaf = rest.substr(std::strlen(from));
      bool conv = leaf == "weight" && std::strcmp(from, "ln_1.") != 0 && std::strcmp(from, "ln_2.") != 0;
      return {layer + to + leaf, conv};
    }
  return {"", false};  // attn.bias / attn.masked_bias: the causal mask buffers
}

}  // namespace

void load_gpt2_safetensors(GPT& model, const std::string& path) {
  io::SafetensorsFile file = io::load_safetensors(path);
  StateDict dict;
  for (auto& [name, t] : file.tensors) {
    std::string hf = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    if (hf == "lm_head.weight") continue;  // tied to wte
    auto [k, conv] = kiln_name(hf);
    if (k.empty()) continue;
    if (conv && t.dim() != 2) fail(path, "'" + name + "' should be 2-D, is " + shape_str(t.shape()));
    dict[k] = conv ? t.t().contiguous() : t;
  }
  // the file's dtype (f32, f16 or bf16) becomes the model's
  StateDict current = model->state_dict();
  for (auto& [k, t] : dict)
    if (auto it = current.find(k); it != current.end() && it->second.dtype() != t.dtype())
      t = t.to(it->second.dtype());
  model->load_state_dict(dict, true);
}

GPT load_llmc_checkpoint(const std::string& path) {
  std::vector<uint8_t> bytes = data::io::read_file("llm.c checkpoint", path);
  if (bytes.size() < 256 * 4) fail(path, "shorter than the 1024-byte llm.c header");
  int32_t h[256];
  std::memcpy(h, bytes.data(), sizeof h);
  if (h[0] != 20240326) fail(path, "not an llm.c GPT-2 checkpoint (magic " + std::to_string(h[0]) + ")");
  if (h[1] != 3 && h[1] != 5)
    fail(path, "unknown llm.c checkpoint version " + std::to_string(h[1]) + " (3: f32, 5: bf16)");
  const int64_t T = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
  auto in = [&](const char* what, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      fail(path, std::string(what) + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  };
  in("max_seq_len", T, 1, 1 << 20);
  in("vocab_size", V, 1, 1 << 24);
  in("num_layers", L, 1, 1024);
  in("num_heads", NH, 1, 1024);
  in("channels", C, 1, 65536);
  in("padded_vocab_size", Vp, V, 1 << 24);
  if (C % NH != 0)
    fail(path, "channels " + std::to_string(C) + " is not divisible by num_heads " + std::to_string(NH));
  // the parameters in llm.c's order, each (rows, cols) per layer or once
  struct Part {
    const char* name;  // kiln's, with %d for the layer
    int64_t rows, cols;
    bool per_layer;
  };
  const Part parts[] = {{"wte.weight", Vp, C, false},
                        {"wpe.weight", T, C, false},
                        {"h.%d.ln1.weight", 1, C, true},
                        {"h.%d.ln1.bias", 1, C, true},
                        {"h.%d.attn.in_proj.weight", 3 * C, C, true},
                        {"h.%d.attn.in_proj.bias", 1, 3 * C, true},
                        {"h.%d.attn.out_proj.weight", C, C, true},
                        {"h.%d.attn.out_proj.bias", 1, C, true},
                        {"h.%d.ln2.weight", 1, C, true},
                        {"h.%d.ln2.bias", 1, C, true},
                        {"h.%d.fc.weight", 4 * C, C, true},
                        {"h.%d.fc.bias", 1, 4 * C, true},
                        {"h.%d.proj.weight", C, 4 * C, true},
                        {"h.%d.proj.bias", 1, C, true},
                        {"ln_f.weight", 1, C, false},
                        {"ln_f.bias", 1, C, false}};
  const int64_t es = h[1] == 3 ? 4 : 2;
  int64_t total = 0;  // elements; every term is below 2^24 * 2^16 * 4, so the sum stays below 2^63
  for (auto& p : parts) total += p.rows * p.cols * (p.per_layer ? L : 1);
  if (static_cast<uint64_t>(total) * es != bytes.size() - 256 * 4)
    fail(path, "holds " + std::to_string(bytes.size() - 256 * 4) +
                   " bytes of parameters, the header's sizes need " + std::to_string(total * es));
  GPTConfig cfg;
  cfg.vocab_size = V;
  cfg.block_size = T;
  cfg.n_layer = L;
  cfg.n_head = NH;
  cfg.n_embd = C;
  GPT model(cfg);
  StateDict dict;
  const uint8_t* at = bytes.data() + 256 * 4;
  auto take = [&](int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    std::vector<float> v(static_cast<size_t>(n));
    if (es == 4) {
      std::memcpy(v.data(), at, static_cast<size_t>(n) * 4);
    } else {
      for (int64_t i = 0; i < n; i++) {
        uint16_t b;
        std::memcpy(&b, at + i * 2, 2);
        v[static_cast<size_t>(i)] = bf16_to_float(b);
      }
    }
    Tensor t = tensor(v, {rows, cols});
    at += n * es;
    return t;
  };
  for (auto& p : parts)
    for (int64_t l = 0; l < (p.per_layer ? L : 1); l++) {
      std::string name = p.name;
      if (p.per_layer) name.replace(name.find("%d"), 2, std::to_string(l));
      Tensor t = take(p.rows, p.cols);
      if (p.rows == 1) t = t.reshape({p.cols});
      if (name == "wte.weight") t = t.slice(0, 0, V).contiguous();  // the padding rows are not tokens
      dict[name] = t;
    }
  model->load_state_dict(dict, true);
  return model;
}

}  // namespace kiln::nn
