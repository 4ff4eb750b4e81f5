// The `kiln` command-line tool: `kiln info` (build and runtime facts), `kiln train` (a character-level
// GPT on a text file, saved to a directory) and `kiln sample` (text from such a directory).
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cache_dir.h"
#include "runtime/cpu/compiler.h"
#include "runtime/cuda/driver.h"
#include "runtime/file_util.h"
#include "runtime/thread_pool.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: kiln <command> [options]\n"
    "commands:\n"
    "  info                                  version, threads, C compiler, kernel cache, devices\n"
    "  train --text FILE [--steps N] [--minutes M] [--out DIR]\n"
    "                                        train a character-level GPT on FILE (default: 500 steps,\n"
    "                                        5 minutes, out dir kiln-model); saves DIR/model.safetensors,\n"
    "                                        DIR/vocab.txt and DIR/config.txt\n"
    "  sample --model DIR [--tokens N] [--temperature T] [--top-k K] [--seed S] [--prompt TEXT]\n"
    "                                        print N (default 200) sampled characters after TEXT\n"
    "  --help                                this text\n";

// --name value options of a command; every name must be in `known`.
std::map<std::string, std::string> options(int argc, char** argv, const std::string& cmd,
                                           const std::vector<std::string>& known) {
  std::map<std::string, std::string> o;
  for (int i = 2; i < argc; i++) {
    std::string s = argv[i];
    if (std::find(known.begin(), known.end(), s) == known.end())
      throw Error("kiln " + cmd + ": unknown option '" + s + "' (see kiln --help)");
    if (i + 1 >= argc) throw Error("kiln " + cmd + ": " + s + " needs a value");
    o[s.substr(2)] = argv[++i];
  }
  return o;
}

template <class T>
T number(const std::map<std::string, std::string>& o, const std::string& key, T fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  try {
    size_t used = 0;
    double v = std::stod(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("");
    return static_cast<T>(v);
  } catch (const std::exception&) {
    throw Error("kiln: --" + key + " expects a number, got '" + it->second + "'");
  }
}

std::string read_file(const std::string& path) {
  if (fs::is_directory(path)) throw Error("kiln: " + path + " is a directory, not a file");
  if (!fs::is_regular_file(path)) throw Error("kiln: no such file: " + path);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("kiln: cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int info() {
  std::printf("kiln %s\n", KILN_VERSION);
  std::printf("CPU threads: %d (hardware: %u)\n", runtime::num_threads(),
              std::thread::hardware_concurrency());
  try {
    std::string id = runtime::compiler_id();  // path, version line, flags
    std::string cc = id.substr(0, id.find('\n'));
    std::string rest = id.substr(id.find('\n') + 1);
    std::printf("C compiler: %s (%s)\n", cc.c_str(), rest.substr(0, rest.find('\n')).c_str());
  } catch (const Error& e) {
    std::printf("C compiler: none found (%s)\n", e.what());
  }
  const std::string dir = runtime::cache_dir();
  int64_t files = 0;
  uintmax_t bytes = 0;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) files++, bytes += e.file_size(ec);
  std::printf("kernel cache: %s (%lld files, %llu bytes)\n", dir.c_str(), static_cast<long long>(files),
              static_cast<unsigned long long>(bytes));
  const auto& cuda = runtime::cuda::availability();
  std::printf("CUDA: %s\n%s",
              cuda.available
                  ? "available (tensors .to(Device::cuda()), or all with KILN_DEVICE=cuda, run there)"
                  : "not available",
              runtime::cuda::describe(cuda).c_str());
  return 0;
}

// config.txt: one "name value" line per GPTConfig field.
void save_config(const std::string& path, const nn::GPTConfig& c) {
  std::ostringstream f;
  f << "vocab_size " << c.vocab_size << "\nblock_size " << c.block_size << "\nn_layer " << c.n_layer
    << "\nn_head " << c.n_head << "\nn_embd " << c.n_embd << "\ndropout " << c.dropout << "\nbias "
    << (c.bias ? 1 : 0) << "\n";
  runtime::write_file_atomic(path, f.str());  // like the model and the vocabulary beside it
}

// The sane range of each config.txt field: a value outside it is a damaged or hand-edited file, and
// building the model first would allocate without bound (n_layer 100000).
struct Field {
  const char* key;
  double lo, hi;
  bool integer;
};
constexpr Field kFields[] = {{"vocab_size", 1, 1 << 24, true},
                             {"block_size", 1, 1 << 20, true},
                             {"n_layer", 1, 1024, true},
                             {"n_head", 1, 1024, true},
                             {"n_embd", 1, 1 << 16, true},
                             {"dropout", 0, 0.999, false},
                             {"bias", 0, 1, true}};

std::string number_text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

nn::GPTConfig load_config(const std::string& path) {
  std::istringstream in(read_file(path));
  std::map<std::string, double> got;
  std::string key;
  double v;
  while (in >> key >> v) {
    auto f =
        std::find_if(std::begin(kFields), std::end(kFields), [&](const Field& f) { return key == f.key; });
    if (f == std::end(kFields)) throw Error("kiln: " + path + ": unknown field '" + key + "'");
    if (got.count(key)) throw Error("kiln: " + path + ": field '" + key + "' appears twice");
    if (!(v >= f->lo && v <= f->hi) || (f->integer && v != std::floor(v)))
      throw Error("kiln: " + path + ": " + key + " " + number_text(v) +
                  " is out of range: " + (f->integer ? "an integer " : "") + "in [" + number_text(f->lo) +
                  ", " + number_text(f->hi) + "]");
    got[key] = v;
  }
  if (!in.eof() || got.empty())
    throw Error("kiln: " + path + " is not a kiln config (expected 'name value' lines)");
  nn::GPTConfig c;
  auto i = [&](const char* k, int64_t& field) {
    if (got.count(k)) field = static_cast<int64_t>(got[k]);
  };
  i("vocab_size", c.vocab_size), i("block_size", c.block_size), i("n_layer", c.n_layer);
  i("n_head", c.n_head), i("n_embd", c.n_embd);
  if (got.count("dropout")) c.dropout = got["dropout"];
  if (got.count("bias")) c.bias = got["bias"] != 0;
  if (c.n_embd % c.n_head != 0)
    throw Error("kiln: " + path + ": n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " +
                std::to_string(c.n_head));
  // each field in range can still multiply to more weights than this machine holds
  double bytes = 4.0 * static_cast<double>(c.num_parameters());
  double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory / 2)
    throw Error("kiln: " + path + ": a model of " + std::to_string(c.num_parameters()) +
                " parameters needs " + number_text(bytes / (1 << 30)) +
                " GiB for its f32 weights alone, more than half of this " + "machine's " +
                number_text(memory / (1 << 30)) + " GiB");
  return c;
}

int train(int argc, char** argv) {
  auto o = options(argc, argv, "train", {"--text", "--steps", "--minutes", "--out"});
  if (!o.count("text")) throw Error("kiln train: --text FILE is required");
  const int64_t steps = number<int64_t>(o, "steps", 500);
  const double minutes = number<double>(o, "minutes", 5);
  if (steps < 1) throw Error("kiln train: --steps must be at least 1");
  if (minutes <= 0) throw Error("kiln train: --minutes must be positive");
  const std::string out = o.count("out") ? o["out"] : "kiln-model";
  std::string text = read_file(o["text"]);
  data::CharTokenizer tok = data::CharTokenizer::from_text(text);
  std::vector<int64_t> ids = tok.encode(text);
  if (ids.size() < 16)
    throw Error("kiln train: " + o["text"] + " is too short to train on (" + std::to_string(ids.size()) +
                " characters; at least 16)");

  manual_seed(1337);
  std::mt19937 rng(1337);
  nn::GPTConfig cfg{.vocab_size = tok.vocab_size(),
                    .block_size = std::min<int64_t>(64, static_cast<int64_t>(ids.size()) - 1),
                    .n_layer = 2,
                    .n_head = 4,
                    .n_embd = 96};
  nn::GPT model(cfg);
  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  optim::CosineWarmupLR sched(opt, std::min<int64_t>(50, steps / 10), steps, 3e-5);
  const int64_t B = 16, T = cfg.block_size;
  std::printf("kiln train: %lld-parameter GPT on %s (%zu characters, vocabulary %lld), %lld steps\n",
              static_cast<long long>(model->num_parameters()), o["text"].c_str(), ids.size(),
              static_cast<long long>(cfg.vocab_size), static_cast<long long>(steps));
  std::uniform_int_distribution<size_t> off(0, ids.size() - static_cast<size_t>(T) - 1);
  auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0;
  float loss_v = 0;
  for (; step < steps; step++) {
    std::vector<int64_t> xs, ys;
    for (int64_t b = 0; b < B; b++) {
      size_t s = off(rng);
      xs.insert(xs.end(), ids.begin() + s, ids.begin() + s + T);
      ys.insert(ys.end(), ids.begin() + s + 1, ids.begin() + s + T + 1);
    }
    auto [logits, loss] = model->forward(tensor(xs, {B, T}), tensor(ys, {B, T}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
    loss_v = loss.item<float>();
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step % 50 == 0 || step + 1 == steps)
      std::printf("step %5lld  loss %.4f  %.1fs\n", static_cast<long long>(step + 1), loss_v, el);
    if (el > minutes * 60) {
      std::printf("time budget reached\n");
      step++;
      break;
    }
  }
  fs::create_directories(out);
  io::save_safetensors(out + "/model.safetensors", model->state_dict());
  tok.save(out + "/vocab.txt");
  save_config(out + "/config.txt", cfg);
  std::printf("trained %lld steps (final loss %.4f); saved %s/{model.safetensors,vocab.txt,config.txt}\n",
              static_cast<long long>(step), loss_v, out.c_str());
  return 0;
}

int sample(int argc, char** argv) {
  auto o = options(argc, argv, "sample",
                   {"--model", "--tokens", "--temperature", "--top-k", "--seed", "--prompt"});
  if (!o.count("model")) throw Error("kiln sample: --model DIR is required");
  const std::string dir = o["model"];
  if (!fs::is_directory(dir)) throw Error("kiln sample: no such directory: " + dir);
  const int64_t n = number<int64_t>(o, "tokens", 200);
  const double temperature = number<double>(o, "temperature", 0.8);
  const int64_t top_k = number<int64_t>(o, "top-k", 0);
  const uint64_t seed = number<uint64_t>(o, "seed", 0);
  if (n < 0) throw Error("kiln sample: --tokens must not be negative");
  if (temperature <= 0) throw Error("kiln sample: --temperature must be positive");
  if (top_k < 0) throw Error("kiln sample: --top-k must not be negative");
  for (const char* f : {"model.safetensors", "vocab.txt", "config.txt"})
    if (!fs::is_regular_file(dir + "/" + f))
      throw Error("kiln sample: " + dir + " has no " + f + " (made by kiln train)");

  nn::GPTConfig cfg = load_config(dir + "/config.txt");
  data::CharTokenizer tok = data::CharTokenizer::load(dir + "/vocab.txt");
  if (tok.vocab_size() != cfg.vocab_size)
    throw Error("kiln sample: vocab.txt and config.txt disagree on the vocabulary size");
  nn::GPT model(cfg);
  model->load_state_dict(io::load_safetensors(dir + "/model.safetensors").tensors);
  model->eval();

  std::string prompt = o.count("prompt") ? o["prompt"] : "";
  std::vector<int64_t> start = tok.encode(prompt);
  if (start.empty()) {  // no prompt: start from a newline if the text has one, else from the first character
    const auto& v = tok.vocab();
    auto nl = std::find(v.begin(), v.end(), U'\n');
    start = {nl == v.end() ? 0 : static_cast<int64_t>(nl - v.begin())};
  }
  Generator gen(seed);
  Tensor idx = tensor(start, {1, static_cast<int64_t>(start.size())});
  auto out =
      model->generate(idx, n, temperature, top_k > 0 ? std::optional<int64_t>(top_k) : std::nullopt, &gen)
          .to_vector<int64_t>();
  std::vector<int64_t> fresh(out.begin() + static_cast<std::ptrdiff_t>(start.size()), out.end());
  std::printf("%s%s\n", prompt.c_str(), tok.decode(fresh).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (cmd == "info") {
      if (argc > 2) throw Error("kiln info: takes no options");
      return info();
    }
    if (cmd == "train") return train(argc, argv);
    if (cmd == "sample") return sample(argc, argv);
    std::fprintf(stderr, "%s%s",
                 cmd.empty() ? "kiln: no command given\n" : ("kiln: unknown command '" + cmd + "'\n").c_str(),
                 kUsage);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
