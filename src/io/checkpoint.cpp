// Training checkpoints as one safetensors file: model tensors under "model.", optimizer state under
// "optim.", step and RNG state under kiln.* metadata keys, user strings under "extra.".
#include <charconv>
#include <string>

#include "kiln/io.h"

namespace kiln::io {

namespace {

constexpr const char* kFormatKey = "kiln.checkpoint";
constexpr const char* kFormatVersion = "1";

template <class T>
T parse_int(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  if (it == meta.end()) throw Error("kiln::io: " + path + ": checkpoint metadata lacks \"" + key + "\"");
  const std::string& s = it->second;
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    throw Error("kiln::io: " + path + ": checkpoint metadata \"" + key + "\" is not an integer: '" + s + "'");
  return v;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  std::map<std::string, Tensor> tensors;
  for (auto& [k, t] : ckpt.model) tensors["model." + k] = t;
  for (auto& [k, t] : ckpt.optimizer) tensors["optim." + k] = t;
  std::map<std::string, std::string> meta;
  meta[kFormatKey] = kFormatVersion;
  meta["kiln.step"] = std::to_string(ckpt.step);
  meta["kiln.rng_seed"] = std::to_string(ckpt.rng_seed);
  meta["kiln.rng_offset"] = std::to_string(ckpt.rng_offset);
  for (auto& [k, v] : ckpt.extra) meta["extra." + k] = v;
  save_safetensors(path, tensors, meta);
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  auto fmt = f.metadata.find(kFormatKey);
  if (fmt == f.metadata.end())
    throw Error("kiln::io: " + path + ": not a kiln checkpoint (no \"" + std::string(kFormatKey) +
                "\" metadata)");
  if (fmt->second != kFormatVersion)
    throw Error("kiln::io: " + path + ": unsupported checkpoint version '" + fmt->second + "'");
  Checkpoint c;
  c.step = parse_int<int64_t>(path, f.metadata, "kiln.step");
  c.rng_seed = parse_int<uint64_t>(path, f.metadata, "kiln.rng_seed");
  c.rng_offset = parse_int<uint64_t>(path, f.metadata, "kiln.rng_offset");
  for (auto& [k, v] : f.metadata)
    if (starts_with(k, "extra.")) c.extra[k.substr(6)] = v;
  for (auto& [k, t] : f.tensors) {
    if (starts_with(k, "model."))
      c.model[k.substr(6)] = t;
    else if (starts_with(k, "optim."))
      c.optimizer[k.substr(6)] = t;
    else
      throw Error("kiln::io: " + path + ": checkpoint tensor '" + k +
                  "' is neither \"model.\" nor \"optim.\"");
  }
  return c;
}

void capture_rng(Checkpoint& ckpt, const Generator& g) {
  ckpt.rng_seed = g.seed();
  ckpt.rng_offset = g.offset();
}

void restore_rng(const Checkpoint& ckpt, Generator& g) { g.set_state(ckpt.rng_seed, ckpt.rng_offset); }

}  // namespace kiln::io
