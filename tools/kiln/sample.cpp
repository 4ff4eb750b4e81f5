// `kiln sample --model DIR [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
// [--prompt TEXT]`: characters from a `kiln train` model, printed as they are drawn (GPT::generate's
// on_token, one cached decoding step per character).
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "args.h"
#include "commands.h"
#include "model_dir.h"

namespace kiln::cli {

namespace {
// Each character is a decoding step (a forward over the whole window once the context passes
// block_size): 100000 take minutes on a CPU. Beyond that a
// request is more likely a typo (1e12) than a wish.
constexpr int64_t kMaxSampleTokens = 100000;

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}
}  // namespace

int sample(int argc, char** argv) {
  Args a(argc, argv, "sample",
         {"--model", "--tokens", "--temperature", "--top-k", "--top-p", "--seed", "--prompt"});
  if (!a.has("--model")) throw Error(a.error("--model DIR is required"));
  const int64_t n = a.integer("--tokens", 200, 0, kMaxSampleTokens);
  const double temperature = a.positive("--temperature", 0.8, 100);
  const int64_t top_k = a.integer("--top-k", 0, 0, 1'000'000);
  const double top_p = a.positive("--top-p", 1, 1);
  const auto seed = static_cast<uint64_t>(a.integer("--seed", 0, 0, INT64_MAX));
  const std::string dir = a.text("--model", "");
  if (!std::filesystem::is_directory(dir)) throw Error(a.error("--model " + dir + ": no such directory"));
  for (const char* f : {"model.safetensors", "vocab.txt", "config.txt"})
    if (!std::filesystem::is_regular_file(dir + "/" + f))
      throw Error(a.error(dir + " has no " + f + " (made by kiln train)"));

  nn::GPTConfig cfg = load_config(dir + "/config.txt");
  data::CharTokenizer tok = data::CharTokenizer::load(dir + "/vocab.txt");
  if (tok.vocab_size() != cfg.vocab_size)
    throw Error(a.error("vocab.txt and config.txt disagree on the vocabulary size"));
  nn::GPT model(cfg);
  model->load_state_dict(io::load_safetensors(dir + "/model.safetensors").tensors);
  model->eval();

  const std::string prompt = a.text("--prompt", "");
  std::vector<int64_t> start = tok.encode(prompt);
  if (start.empty()) {  // no prompt: start from a newline if the text has one, else from the first character
    const auto& v = tok.vocab();
    auto nl = std::find(v.begin(), v.end(), U'\n');
    start = {nl == v.end() ? 0 : static_cast<int64_t>(nl - v.begin())};
  }
  Generator gen(seed);
  Tensor idx = tensor(start, {1, static_cast<int64_t>(start.size())});
  print(prompt);
  model->generate(idx, n,
                  {.temperature = temperature,
                   .top_k = top_k > 0 ? std::optional<int64_t>(top_k) : std::nullopt,
                   .top_p = top_p < 1 ? std::optional<double>(top_p) : std::nullopt,
                   .generator = &gen,
                   .on_token = [&](const Tensor& next) { print(tok.decode({next.item<int64_t>()})); }});
  print("\n");
  return 0;
}

}  // namespace kiln::cli
