// kiln's main job: train a small GPT from scratch on a task that needs no download (adding two
// 2-digit numbers written as characters), show progress, measure accuracy on held-out problems,
// print samples, save a checkpoint and a loss-curve SVG. With --text FILE it trains a
// character-level model on that file instead and samples from it. Arguments, the text file and the
// output folder are checked before training starts. --dtype bf16 trains under kiln::Autocast (bf16
// matmuls and attention; weights, gradients and optimizer state stay f32).
//   build/examples/demo [--minutes M] [--steps N] [--text FILE] [--out DIR] [--dtype f32|bf16] [--quick]
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  double minutes = 5;
  int64_t steps = 6000;
  std::string text, out = "build/demo";
  std::optional<DType> autocast;  // --dtype bf16: the training forward under kiln::Autocast
  bool quick = false;  // a few steps and a short sample: checks the program runs (the test suite uses it)
};

// A number in (0, hi] (whole if `whole`), or a kiln::Error naming the option.
double number(const std::string& flag, const std::string& v, double hi, bool whole) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || !std::isfinite(x) || x <= 0 || x > hi || (whole && x != std::floor(x))) {
    std::ostringstream range;
    range << (whole ? "a whole number from 1 to " : "a number above 0 and at most ") << hi;
    throw Error("demo: " + flag + " " + v + ": expected " + range.str());
  }
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("demo: " + s + " needs a value");
      return argv[++i];
    };
    if (s == "--minutes")
      a.minutes = number(s, next(), 7 * 24 * 60, false);
    else if (s == "--steps")
      a.steps = static_cast<int64_t>(number(s, next(), 1e7, true));
    else if (s == "--text")
      a.text = next();
    else if (s == "--out")
      a.out = next();
    else if (s == "--dtype") {
      std::string v = next();
      if (v != "f32" && v != "bf16") throw Error("demo: --dtype " + v + ": expected f32 or bf16");
      a.autocast = v == "bf16" ? std::optional(DType::BF16) : std::nullopt;
    } else if (s == "--quick")
      a.quick = true, a.steps = 5;
    else
      throw Error("demo: unknown argument " + s + " (see the comment at the top of examples/demo.cpp)");
  }
  return a;
}

// The output folder, made now: a path that cannot hold the results fails before training, not after.
void prepare_out(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error("demo: --out " + dir + " is a file, not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error("demo: --out " + dir + ": cannot create the directory (" + ec.message() + ")");
  const std::string probe = dir + "/.demo-write-check";
  if (!std::ofstream(probe)) throw Error("demo: --out " + dir + ": cannot write files there");
  fs::remove(probe, ec);
}

// --- the addition task: "ba+dc=" then the sum's three digits, every number least significant
// digit first (so digits of one place line up: the carry flows left to right) ---
// tokens 0-9 are digits, 10 is '+', 11 is '='; a problem is 9 tokens; the model sees the first 8
// and is trained only on the three answer digits (other targets are -1, ignored by the loss).
constexpr int64_t kVocab = 12, kLen = 9;
std::vector<int64_t> problem(int a, int b) {
  int s = a + b;
  return {a % 10, a / 10, 10, b % 10, b / 10, 11, s % 10, (s / 10) % 10, s / 100};
}
// never trained on: 10% of problems for the final test, 10% to choose when to stop (validation),
// picked by a hash so that every digit still appears in every place during training
int bucket(int a, int b) {
  return static_cast<int>(((static_cast<uint32_t>(a * 100 + b) * 2654435761u) >> 16) % 10);
}
bool test_problem(int a, int b) { return bucket(a, b) == 7; }
bool validation_problem(int a, int b) { return bucket(a, b) == 3; }
bool held_out(int a, int b) { return test_problem(a, b) || validation_problem(a, b); }

std::string show(const std::vector<int64_t>& t) {
  std::string r;
  for (auto x : t) r += x < 10 ? char('0' + x) : x == 10 ? '+' : '=';
  return r;
}

struct Batch {
  Tensor x, y;
};

Batch addition_batch(int64_t B, std::mt19937& rng) {
  std::vector<int64_t> xs, ys;
  std::uniform_int_distribution<int> d(0, 99);
  for (int64_t i = 0; i < B; i++) {
    int a, b;
    do a = d(rng), b = d(rng);
    while (held_out(a, b));
    auto p = problem(a, b);
    for (int64_t t = 0; t + 1 < kLen; t++) {
      xs.push_back(p[t]);
      ys.push_back(t + 1 >= 6 ? p[t + 1] : -1);
    }
  }
  return {tensor(xs, {B, kLen - 1}), tensor(ys, {B, kLen - 1})};
}

// Greedy answers for problems (B of them): feed "ab+cd=", take three argmax steps.
std::vector<std::vector<int64_t>> solve(const nn::GPT& model, const std::vector<std::pair<int, int>>& ps) {
  NoGradGuard no_grad;
  std::vector<int64_t> xs;
  for (auto [a, b] : ps) {
    auto p = problem(a, b);
    xs.insert(xs.end(), p.begin(), p.begin() + 6);
  }
  Tensor idx = tensor(xs, {static_cast<int64_t>(ps.size()), 6});
  auto out = model->generate(idx, 3, 1.0, 1).to_vector<int64_t>();
  std::vector<std::vector<int64_t>> r;
  for (size_t i = 0; i < ps.size(); i++) r.emplace_back(out.begin() + i * 9, out.begin() + i * 9 + 9);
  return r;
}

double accuracy(const nn::GPT& model, const std::vector<std::pair<int, int>>& ps) {
  auto got = solve(model, ps);
  int ok = 0;
  for (size_t i = 0; i < ps.size(); i++) ok += got[i] == problem(ps[i].first, ps[i].second);
  return static_cast<double>(ok) / static_cast<double>(ps.size());
}

// --- the text task: next-character prediction on a user's file ---
struct TextData {
  std::string vocab;
  std::vector<int64_t> ids;
};
TextData read_text(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw Error("demo: --text " + path + " is a directory, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("demo: --text " + path + ": no such file or not readable");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() < 16)
    throw Error("demo: " + path + " is too short to train on (" + std::to_string(s.size()) +
                " bytes; at least 16)");
  TextData d;
  d.vocab = s;
  std::sort(d.vocab.begin(), d.vocab.end());
  d.vocab.erase(std::unique(d.vocab.begin(), d.vocab.end()), d.vocab.end());
  for (char c : s) d.ids.push_back(static_cast<int64_t>(d.vocab.find(c)));
  return d;
}
Batch text_batch(const TextData& d, int64_t B, int64_t T, std::mt19937& rng) {
  std::uniform_int_distribution<size_t> off(0, d.ids.size() - T - 1);
  std::vector<int64_t> xs, ys;
  for (int64_t i = 0; i < B; i++) {
    size_t o = off(rng);
    xs.insert(xs.end(), d.ids.begin() + o, d.ids.begin() + o + T);
    ys.insert(ys.end(), d.ids.begin() + o + 1, d.ids.begin() + o + T + 1);
  }
  return {tensor(xs, {B, T}), tensor(ys, {B, T})};
}

// --- output: a progress line, the loss curve as SVG ---
void progress(int64_t step, int64_t total, float loss, double tok_s, double elapsed, double left) {
  int w = 24, filled = static_cast<int>(w * static_cast<double>(step) / static_cast<double>(total));
  std::printf("\r[%s%s] step %5lld  loss %.4f  %7.0f tok/s  %5.0fs  (~%.0fs left) ",
              std::string(filled, '#').c_str(), std::string(w - filled, '.').c_str(),
              static_cast<long long>(step), loss, tok_s, elapsed, left);
  std::fflush(stdout);
}

void write_svg(const std::string& path, const std::vector<float>& losses) {
  const double W = 640, H = 360, pad = 40;
  float hi = *std::max_element(losses.begin(), losses.end()), lo = 0;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << W / 2
     << "\" y=\"20\" text-anchor=\"middle\" font-family=\"sans-serif\">kiln demo: training loss</text>\n"
     << "<line x1=\"" << pad << "\" y1=\"" << H - pad << "\" x2=\"" << W - pad << "\" y2=\"" << H - pad
     << "\" stroke=\"black\"/>\n"
     << "<line x1=\"" << pad << "\" y1=\"" << pad << "\" x2=\"" << pad << "\" y2=\"" << H - pad
     << "\" stroke=\"black\"/>\n"
     << "<text x=\"" << pad - 4 << "\" y=\"" << pad + 4 << "\" text-anchor=\"end\" font-size=\"11\">" << hi
     << "</text>\n"
     << "<text x=\"" << pad - 4 << "\" y=\"" << H - pad
     << "\" text-anchor=\"end\" font-size=\"11\">0</text>\n"
     << "<text x=\"" << W - pad << "\" y=\"" << H - pad + 16
     << "\" text-anchor=\"end\" font-size=\"11\">step " << losses.size()
     << "</text>\n<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < losses.size(); i++) {
    double x = pad + (W - 2 * pad) * static_cast<double>(i) /
                         std::max<double>(1, static_cast<double>(losses.size() - 1));
    double y = H - pad - (H - 2 * pad) * (losses[i] - lo) / std::max(1e-9f, hi - lo);
    os << x << "," << y << " ";
  }
  os << "\"/>\n</svg>\n";
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << os.str();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("demo: cannot write " + path + " (" + ec.message() + ")");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse(argc, argv);
    manual_seed(1337);
    std::mt19937 rng(1337);
    bool text_mode = !args.text.empty();
    TextData text;
    if (text_mode) text = read_text(args.text);
    prepare_out(args.out);
    const auto n_text = static_cast<int64_t>(text.ids.size());
    nn::GPTConfig cfg{.vocab_size = text_mode ? static_cast<int64_t>(text.vocab.size()) : kVocab,
                      .block_size = text_mode ? std::min<int64_t>(64, n_text - 1) : kLen - 1,
                      .n_layer = 2,
                      .n_head = 4,
                      .n_embd = text_mode ? 96 : 64};
    nn::GPT model(cfg);
    optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
    const int64_t B = text_mode ? 32 : 128, warmup = std::min<int64_t>(100, args.steps / 10);
    // the cosine decay should end with the time budget: after 30 steps the total is re-estimated
    // from the measured step time
    optim::CosineWarmupLR sched(opt, warmup, std::max(args.steps, warmup + 1), 3e-5);
    std::printf(
        "kiln demo: training a %lld-parameter GPT (%lld layers, %lld heads, width %lld) on %s, on the CPU\n",
        static_cast<long long>(model->num_parameters()), static_cast<long long>(cfg.n_layer),
        static_cast<long long>(cfg.n_head), static_cast<long long>(cfg.n_embd),
        text_mode ? args.text.c_str() : "2-digit addition (20% of problems held out)");

    std::vector<std::pair<int, int>> test, validation;
    for (int a = 0; a < 100; a++)
      for (int b = 0; b < 100; b++) {
        if (test_problem(a, b)) test.push_back({a, b});
        if (validation_problem(a, b)) validation.push_back({a, b});
      }
    std::string svg = args.out + "/loss.svg", ckpt = args.out + "/checkpoint.safetensors";
    double best = -1;

    std::vector<float> losses;
    auto t0 = Clock::now();
    double budget = args.minutes * 60, acc = 0, el_at_10 = 0;
    int64_t step = 0, tokens = 0;
    for (; step < args.steps; step++) {
      Batch b = text_mode ? text_batch(text, B, cfg.block_size, rng) : addition_batch(B, rng);
      Tensor loss;
      {
        Autocast scope(args.autocast);
        loss = model->forward(b.x, b.y).second;
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
      sched.step();
      losses.push_back(loss.item<float>());
      tokens += b.x.numel();
      double el = std::chrono::duration<double>(Clock::now() - t0).count();
      if (step + 1 == 10) el_at_10 = el;
      if (step + 1 == 30 && args.steps > 200) {  // steps 10 to 30 time a step (kernels compiled by then)
        auto fit = static_cast<int64_t>(30 + 0.97 * (budget - el) / ((el - el_at_10) / 20));
        if (fit < args.steps && fit > warmup + 30) {
          args.steps = fit;
          sched.set_total_steps(args.steps);
        }
      }
      if (step % 10 == 0 || step + 1 == args.steps) {
        double per = el / static_cast<double>(step + 1);
        double left = std::min(budget - el, per * static_cast<double>(args.steps - step - 1));
        progress(step + 1, args.steps, losses.back(), static_cast<double>(tokens) / el, el,
                 std::max(0.0, left));
      }
      if (!text_mode && (step + 1) % 250 == 0) {  // keep the best model; stop once it has learned
        double val = accuracy(model, validation);
        std::printf("\n  validation accuracy after %lld steps: %.1f%%%s\n", static_cast<long long>(step + 1),
                    100 * val, val > best ? " (best so far: saved)" : "");
        if (val > best) {
          best = val;
          io::save_safetensors(ckpt, model->state_dict(),
                               {{"task", "addition"}, {"step", std::to_string(step + 1)}});
        }
        if (val >= 0.99) {
          step++;
          break;
        }
      }
      if (el > budget) {
        step++;
        break;
      }
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("\ntrained %lld steps in %.1f s (%.0f tokens/s)\n", static_cast<long long>(step), secs,
                static_cast<double>(tokens) / secs);

    write_svg(svg, losses);
    if (best < 0) {
      io::save_safetensors(ckpt, model->state_dict(), {{"task", text_mode ? "text" : "addition"}});
    } else {  // back to the model that did best on the validation problems
      auto params = model->state_dict();
      io::load_safetensors_into(ckpt, params, true);
    }

    if (text_mode) {
      Generator g(7);
      model->eval();
      Tensor start = tensor(std::vector<int64_t>{text.ids[0]}, {1, 1});
      // each new context length compiles new kernels: the quick run samples a few characters only
      auto out = model->generate(start, args.quick ? 8 : 200, 0.8, 10, &g).to_vector<int64_t>();
      std::string s;
      for (auto id : out) s += text.vocab[static_cast<size_t>(id)];
      std::printf("sample:\n%s\n", s.c_str());
    } else {
      model->eval();
      acc = accuracy(model, test);
      std::printf("accuracy on %zu held-out test problems: %.1f%%\n", test.size(), 100 * acc);
      std::vector<std::pair<int, int>> few;
      for (size_t i = 0; i < 5; i++) few.push_back(test[(2 * i + 1) * test.size() / 10]);
      auto got = solve(model, few);
      std::printf(
          "samples: the model reads and writes every number ones digit first, so it makes each carry\n"
          "before the digit the carry changes (%d + %d = %d is written %s); read back in the usual order:\n",
          few[0].first, few[0].second, few[0].first + few[0].second,
          show(problem(few[0].first, few[0].second)).c_str());
      for (size_t i = 0; i < few.size(); i++) {
        auto want = problem(few[i].first, few[i].second);
        int ans = static_cast<int>(got[i][6] + 10 * got[i][7] + 100 * got[i][8]);
        std::printf("  model wrote %s   read back: %2d + %2d = %3d   %s\n", show(got[i]).c_str(),
                    few[i].first, few[i].second, ans, got[i] == want ? "right" : "wrong");
      }
    }
    std::printf("checkpoint: %s\nloss curve: %s\n", ckpt.c_str(), svg.c_str());
    return args.quick || text_mode || acc >= 0.95 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
