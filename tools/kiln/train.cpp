// `kiln train (--text FILE | --tokens SHARD) [--steps N] [--minutes M] [--out DIR] [--dtype f32|bf16]`:
// a GPT trained on FILE's characters, or on the token ids of an llm.c token shard (its vocabulary:
// the vocab.txt beside it, else the largest id + 1), saved to DIR; bf16 trains under kiln::Autocast
// (bf16 matmuls, f32 weights and optimizer state). Every option, the data and the output directory
// are checked before training starts.
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "args.h"
#include "commands.h"
#include "model_dir.h"

namespace kiln::cli {

int train(int argc, char** argv) {
  Args a(argc, argv, "train", {"--text", "--tokens", "--steps", "--minutes", "--out", "--dtype"});
  if (a.has("--text") == a.has("--tokens"))
    throw Error(a.error("give one of --text FILE and --tokens SHARD (an llm.c token shard)"));
  const std::string dtype = a.text("--dtype", "f32");
  if (dtype != "f32" && dtype != "bf16") throw Error(a.error("--dtype " + dtype + ": expected f32 or bf16"));
  const std::optional<DType> autocast = dtype == "bf16" ? std::optional(DType::BF16) : std::nullopt;
  int64_t steps = a.integer("--steps", 500, 1, 10'000'000);
  const double minutes = a.positive("--minutes", 5, 7 * 24 * 60);
  std::optional<data::CharTokenizer> tok;  // the characters the ids stand for, when known
  std::vector<int64_t> ids;
  int64_t vocab = 0;
  const std::string path = a.has("--text") ? a.text("--text", "") : a.text("--tokens", "");
  if (a.has("--text")) {
    const std::string text = a.read_file("--text");
    tok = data::CharTokenizer::from_text(text);
    ids = tok->encode(text);
    vocab = tok->vocab_size();
  } else {
    const std::string beside = (std::filesystem::path(path).parent_path() / "vocab.txt").string();
    if (std::filesystem::is_regular_file(beside)) tok = data::CharTokenizer::load(beside);
    std::vector<uint16_t> shard = data::read_llmc_tokens(path, tok ? tok->vocab_size() : 0);
    ids.assign(shard.begin(), shard.end());
    vocab = tok ? tok->vocab_size() : (ids.empty() ? 1 : *std::max_element(ids.begin(), ids.end()) + 1);
  }
  if (ids.size() < 16)
    throw Error(
        a.error(path + " is too short to train on (" + std::to_string(ids.size()) + " tokens; at least 16)"));
  const std::string out = a.output_dir("--out", "kiln-model");

  manual_seed(1337);
  std::mt19937 rng(1337);
  nn::GPTConfig cfg{.vocab_size = vocab,
                    .block_size = std::min<int64_t>(64, static_cast<int64_t>(ids.size()) - 1),
                    .n_layer = 2,
                    .n_head = 4,
                    .n_embd = 96};
  nn::GPT model(cfg);
  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  const int64_t warmup = std::min<int64_t>(50, steps / 10);
  optim::CosineWarmupLR sched(opt, warmup, std::max(steps, warmup + 1), 3e-5);
  const int64_t B = 16, T = cfg.block_size;
  std::printf(
      "kiln train: %lld-parameter GPT on %s (%zu tokens, vocabulary %lld), %lld steps or %g minutes\n",
      static_cast<long long>(model->num_parameters()), path.c_str(), ids.size(),
      static_cast<long long>(cfg.vocab_size), static_cast<long long>(steps), minutes);
  std::uniform_int_distribution<size_t> off(0, ids.size() - static_cast<size_t>(T) - 1);
  const double budget = minutes * 60;
  auto t0 = std::chrono::steady_clock::now();
  double el = 0, el_at_10 = 0;
  int64_t step = 0;
  float loss_v = 0;
  for (; step < steps; step++) {
    std::vector<int64_t> xs, ys;
    for (int64_t b = 0; b < B; b++) {
      size_t s = off(rng);
      xs.insert(xs.end(), ids.begin() + s, ids.begin() + s + T);
      ys.insert(ys.end(), ids.begin() + s + 1, ids.begin() + s + T + 1);
    }
    Tensor loss;
    {
      Autocast scope(autocast);
      loss = model->forward(tensor(xs, {B, T}), tensor(ys, {B, T})).second;
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
    loss_v = loss.item<float>();
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step + 1 == 10) el_at_10 = el;
    // the time budget: steps 10 to 30 (kernels compiled by then) give the step time; if the budget
    // ends the run first, the cosine decay is fitted to the steps that fit, so it still ends low
    if (step + 1 == 30 && steps > 60) {
      double per = (el - el_at_10) / 20;
      auto fit = static_cast<int64_t>(30 + 0.97 * (budget - el) / per);
      if (fit < steps) {
        steps = std::max({fit, warmup + 1, int64_t{31}});  // the schedule's end stays past the warmup
        sched.set_total_steps(steps);
        std::printf("about %lld steps fit in %g minutes: the learning-rate schedule now ends at step %lld\n",
                    static_cast<long long>(std::max<int64_t>(fit, 0)), minutes,
                    static_cast<long long>(steps));
      }
    }
    if (step % 50 == 0 || step + 1 == steps)
      std::printf("step %5lld  loss %.4f  %.1fs\n", static_cast<long long>(step + 1), loss_v, el);
    if (el > budget) {
      std::printf("time budget reached\n");
      step++;
      break;
    }
  }
  io::save_safetensors(out + "/model.safetensors", model->state_dict());
  if (tok) tok->save(out + "/vocab.txt");
  save_config(out + "/config.txt", cfg);
  std::printf("trained %lld steps in %.1fs (final loss %.4f); saved %s/{model.safetensors,%sconfig.txt}\n",
              static_cast<long long>(step), el, loss_v, out.c_str(), tok ? "vocab.txt," : "");
  return 0;
}

}  // namespace kiln::cli
