// nn::GPT::generate with the static key/value cache: logits and greedy tokens against full forward
// passes (inside block_size and past it, where the window slides), left-padded prompts against
// each row alone, top-k / top-p / stop tokens, argument errors, and no new kernels as the
// generation grows longer.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "ir/node.h"
#include "nn/nn_check.h"
#include "runtime/buffer.h"

using namespace kiln;
using kiln::testing::expect_error;

namespace {
nn::GPTConfig small(int64_t block_size = 32) {
  return {.vocab_size = 50, .block_size = block_size, .n_layer = 2, .n_head = 4, .n_embd = 32};
}
nn::GPT model(int64_t block_size = 32) {
  manual_seed(3);
  nn::GPT g(small(block_size));
  g->eval();
  return g;
}
Tensor tokens(int64_t B, int64_t T, uint64_t seed) {
  Generator gen(seed);
  return randint(0, 50, {B, T}, gen, {.dtype = DType::I64}).realize();
}
// generate's per-step logits (B, V), as seen by on_logits
struct Recorded {
  Tensor out;
  std::vector<std::vector<float>> logits;
};
Recorded run(const nn::GPT& g, const Tensor& idx, int64_t n, nn::GenerateOptions o) {
  Recorded r;
  o.on_logits = [&](const Tensor& l) { r.logits.push_back(l.to_vector<float>()); };
  r.out = g->generate(idx, n, o);
  return r;
}
void expect_near(const std::vector<float>& a, const std::vector<float>& b, double tol,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  EXPECT_LE(worst, tol) << what;
}
// Every token a run of 2 rows drew after a prompt of T0 is among its step's k largest logits.
void expect_draws_within_top_k(const Recorded& r, int64_t T0, int64_t k) {
  auto out = r.out.to_vector<int64_t>();
  const int64_t T = r.out.size(1);
  for (size_t s = 0; s < r.logits.size(); s++)
    for (int64_t b = 0; b < 2; b++) {
      std::vector<float> row(r.logits[s].begin() + b * 50, r.logits[s].begin() + (b + 1) * 50);
      float drawn = row[size_t(out[size_t(b * T + T0) + s])];
      std::sort(row.begin(), row.end(), std::greater<float>());
      EXPECT_GE(drawn, row[size_t(k - 1)]) << "top_k " << k << " row " << b << " step " << s;
    }
}
int64_t argmax(const std::vector<float>& v, size_t from, size_t n) {
  return std::max_element(v.begin() + from, v.begin() + from + n) - (v.begin() + from);
}
}  // namespace

// Inside block_size: by causality, the no-cache path's logits at step k (a forward over the first
// T0 + k tokens) are forward(all tokens)[:, T0 + k - 1], so one forward checks every step.
TEST(GptGenerate, CacheMatchesFullForward) {
  nn::GPT g = model();
  Tensor prompt = tokens(2, 6, 1);
  const int64_t n = 20, T0 = 6, V = 50;
  Recorded r = run(g, prompt, n, {.top_k = 1});
  ASSERT_EQ(r.out.shape(), (Shape{2, T0 + n}));
  EXPECT_EQ(r.out.slice(1, 0, T0).to_vector<int64_t>(), prompt.to_vector<int64_t>());
  ASSERT_EQ(r.logits.size(), size_t(n));
  auto ref = g(r.out.slice(1, 0, T0 + n - 1)).to_vector<float>();  // (2, 25, V)
  auto out = r.out.to_vector<int64_t>();
  for (int64_t k = 0; k < n; k++) {
    std::vector<float> want;
    for (int64_t b = 0; b < 2; b++) {
      size_t at = size_t(((b * (T0 + n - 1)) + T0 - 1 + k) * V);
      want.insert(want.end(), ref.begin() + at, ref.begin() + at + V);
      EXPECT_EQ(out[size_t(b * (T0 + n) + T0 + k)], argmax(ref, at, V)) << "row " << b << " step " << k;
    }
    expect_near(r.logits[size_t(k)], want, 1e-5, "step " + std::to_string(k));
  }
}

// Each one-token step after the prompt is a captured step replayed (kiln::Jit): recorded at its
// first and second calls, replayed from the third; with dropout at work in training mode it is not.
TEST(GptGenerate, DecodeStepsReplayACapturedStep) {
  nn::GPT g = model();
  const int64_t before = stats().jit_replays;
  Recorded r = run(g, tokens(2, 6, 3), 12, {.top_k = 1});
  EXPECT_EQ(stats().jit_replays - before, 12 - 1 - 2);  // the prompt's step, then two recorded
  nn::GPTConfig with_dropout = small();
  with_dropout.dropout = 0.1;
  nn::GPT d(with_dropout);
  d->train();
  const int64_t before_d = stats().jit_replays;
  Tensor out = d->generate(tokens(1, 4, 5), 6, {.top_k = 1});
  EXPECT_EQ(out.shape(), (Shape{1, 10}));
  EXPECT_EQ(stats().jit_replays, before_d);
}

// The recompute path (use_cache = false, one forward over the context per step, as generate did
// before the cache) draws the same greedy tokens with the same logits, also past block_size where
// the window slides; and those steps are forward passes over the last block_size tokens.
TEST(GptGenerate, CacheMatchesRecomputeAcrossTheWindow) {
  nn::GPT g = model();
  Tensor prompt = tokens(1, 29, 2);
  const int64_t n = 7, T0 = 29, L = 32;
  Recorded cached = run(g, prompt, n, {.top_k = 1});
  Recorded full = run(g, prompt, n, {.top_k = 1, .use_cache = false});
  EXPECT_EQ(cached.out.to_vector<int64_t>(), full.out.to_vector<int64_t>());
  ASSERT_EQ(cached.logits.size(), size_t(n));
  for (int64_t k = 0; k < n; k++) {
    expect_near(cached.logits[size_t(k)], full.logits[size_t(k)], 1e-5, "step " + std::to_string(k));
    int64_t T = T0 + k;
    if (T <= L) continue;
    auto want = g(cached.out.slice(1, T - L, T)).index({Slice(), -1, Slice()}).to_vector<float>();
    expect_near(cached.logits[size_t(k)], want, 1e-5, "window step " + std::to_string(k));
  }
}

// Left-padded prompts of lengths 3 and 7: each row draws (greedily) and sees the logits it would
// alone, before and after its context passes block_size.
TEST(GptGenerate, PaddedPromptsMatchEachRowAlone) {
  nn::GPT g = model();
  Tensor a = tokens(1, 3, 4), b = tokens(1, 7, 5);
  Tensor batch = cat({cat({full({1, 4}, 49, DType::I64), a}, 1), b}, 0);  // row 0: 4 padding tokens
  const int64_t n = 28;                                                   // row 1 passes 32
  Recorded both = run(g, batch, n, {.top_k = 1, .prompt_lengths = {3, 7}});
  Recorded ra = run(g, a, n, {.top_k = 1}), rb = run(g, b, n, {.top_k = 1});
  EXPECT_EQ(both.out.slice(1, 0, 7).to_vector<int64_t>(), batch.to_vector<int64_t>());  // padding kept
  EXPECT_EQ(both.out.index({0, Slice(4, 7 + n)}).to_vector<int64_t>(),
            ra.out.reshape({-1}).to_vector<int64_t>());
  EXPECT_EQ(both.out.index({1, Slice()}).to_vector<int64_t>(), rb.out.reshape({-1}).to_vector<int64_t>());
  for (size_t k = 0; k < size_t(n); k++) {
    std::vector<float> row0(both.logits[k].begin(), both.logits[k].begin() + 50);
    std::vector<float> row1(both.logits[k].begin() + 50, both.logits[k].end());
    expect_near(row0, ra.logits[k], 1e-5, "row 0 step " + std::to_string(k));
    expect_near(row1, rb.logits[k], 1e-5, "row 1 step " + std::to_string(k));
  }
}

// top_k keeps the k largest logits, a tiny top_p only the most likely token, top_p = 1 nothing is
// dropped; a stop token ends a row (later tokens are the stop token) and, for every row, the
// generation (no more on_token calls).
TEST(GptGenerate, TopKTopPAndStopToken) {
  nn::GPT g = model();
  Tensor prompt = tokens(2, 4, 6);
  Generator g1(1);
  expect_draws_within_top_k(run(g, prompt, 6, {.top_k = 3, .generator = &g1}), 4, 3);
  Generator g2(2), g3(2), g4(3), g5(3);
  EXPECT_EQ(g->generate(prompt, 6, {.top_p = 1e-6, .generator = &g2}).to_vector<int64_t>(),
            g->generate(prompt, 6, {.top_k = 1, .generator = &g3}).to_vector<int64_t>());
  EXPECT_EQ(g->generate(prompt, 6, {.temperature = 0.7, .top_p = 1.0, .generator = &g4}).to_vector<int64_t>(),
            g->generate(prompt, 6, 0.7, std::nullopt, &g5).to_vector<int64_t>());
  // stop at row 0's third greedy token; row 1 goes on until it draws it too (or the end)
  auto greedy = g->generate(prompt, 6, {.top_k = 1}).to_vector<int64_t>();
  int64_t stop = greedy[6];
  int calls = 0;
  auto stopped =
      g->generate(prompt, 6, {.top_k = 1, .stop_token = stop, .on_token = [&](const Tensor&) { calls++; }})
          .to_vector<int64_t>();
  for (int64_t b = 0; b < 2; b++) {
    bool seen = false;
    for (int64_t t = 4; t < 10; t++) {
      auto i = size_t(b * 10 + t);
      EXPECT_EQ(stopped[i], seen ? stop : greedy[i]) << "row " << b << " column " << t;
      seen = seen || greedy[i] == stop;
    }
  }
  int64_t last_stop = 0;
  for (int64_t b = 0; b < 2; b++) {
    int64_t t = 4;
    while (t < 10 && greedy[size_t(b * 10 + t)] != stop) t++;
    last_stop = std::max(last_stop, t);
  }
  EXPECT_EQ(calls, std::min<int64_t>(6, last_stop - 4 + 1));
}

// Tokens are drawn on the device: the first draw is the one multinomial(softmax(logits / t)) makes
// from the same generator state, and with top_k every drawn token is among the k largest logits
// (found by an exact search over the floats' order, negative logits included).
TEST(GptGenerate, DeviceDrawIsMultinomialsDrawWithinTopK) {
  nn::GPT g = model();
  Tensor prompt = tokens(2, 4, 9);
  Generator ga(5), gb(5);
  Recorded one = run(g, prompt, 1, {.temperature = 0.8, .generator = &ga});
  Tensor want = multinomial((tensor(one.logits[0], {2, 50}) / 0.8).softmax(-1), 1, false, gb);
  EXPECT_EQ(one.out.slice(1, 4, 5).to_vector<int64_t>(), want.to_vector<int64_t>());
  for (int64_t k : {1, 7, 49}) {
    Generator gk(static_cast<uint64_t>(k));
    expect_draws_within_top_k(run(g, prompt, 8, {.top_k = k, .generator = &gk}), 4, k);
  }
}

// NaN logits are an error naming the row, on the device draw (top-k, plain) and on the host's (top-p),
// not a token drawn silently.
TEST(GptGenerate, NaNLogitsAreAnError) {
  nn::GPT g = model();
  g->ln_f->weight.assign_(full({32}, NAN));
  Tensor prompt = tokens(2, 4, 10);
  expect_error([&] { g->generate(prompt, 3, {.top_k = 5}); }, {"GPT", "logits of row 0 are NaN"});
  expect_error([&] { g->generate(prompt, 3, nn::GenerateOptions{}); }, {"GPT", "logits of row 0 are NaN"});
  expect_error([&] { g->generate(prompt, 3, {.top_p = 0.5}); }, {"GPT", "NaN"});
}

TEST(GptGenerate, ArgumentErrors) {
  nn::GPT g = model();
  Tensor prompt = tokens(2, 4, 7);
  expect_error([&] { g->generate(prompt, 1, {.top_p = 0.0}); }, {"GPT", "top_p must be in (0, 1]"});
  expect_error([&] { g->generate(prompt, 1, {.top_p = 1.5}); }, {"GPT", "top_p must be in (0, 1]"});
  expect_error([&] { g->generate(prompt, 1, {.stop_token = 50}); }, {"GPT", "stop_token 50", "50-token"});
  expect_error([&] { g->generate(prompt, 1, {.prompt_lengths = {4}}); },
               {"GPT", "1 prompt_lengths", "(2, 4)"});
  expect_error(
      [&] {
        g->generate(prompt, 1, {.prompt_lengths = {4, 5}});
      },
      {"GPT", "prompt_lengths[1] = 5", "[1, T = 4]"});
  expect_error([&] { g->generate(prompt, 1, {.prompt_lengths = {0, 4}}); }, {"GPT", "prompt_lengths[0] = 0"});
}

// With the cache every decoding step runs the same kernels: 60 new tokens compile exactly what 20
// do (each counted from an empty kernel cache), and generating again compiles nothing.
TEST(GptGenerate, LongerGenerationCompilesNoNewKernels) {
  nn::GPT g = model(128);
  Tensor prompt = tokens(2, 5, 8);
  std::string old_dir = settings().cache_dir;
  auto compiled = [&](int64_t n, const std::string& dir) {
    settings().cache_dir = ::testing::TempDir() + "kiln_generate_" + dir + "_" + std::to_string(::getpid());
    std::filesystem::remove_all(settings().cache_dir);
    clear_memory_cache();
    int64_t before = stats().kernels_compiled;
    model(128)->generate(prompt, n, {.top_k = 5});  // a model of its own: no steps kept from before
    int64_t c = stats().kernels_compiled - before;
    std::filesystem::remove_all(settings().cache_dir);
    return c;
  };
  int64_t c20 = compiled(20, "a"), c60 = compiled(60, "b");
  int64_t before = stats().kernels_compiled;
  g->generate(prompt, 60, {.top_k = 5});  // memory cache of the 60-token run
  int64_t again = stats().kernels_compiled - before;
  settings().cache_dir = old_dir;
  EXPECT_GT(c20, 0);
  EXPECT_EQ(c60, c20);
  EXPECT_EQ(again, 0);
}

// A later call of the same setting replays the steps earlier calls captured, from its first token:
// nothing compiled, and the draws of the eager steps. Training drops them; after an eager optimizer
// step (new parameter buffers) the draws are the new model's.
TEST(GptGenerate, LaterCallsReplayTheKeptSteps) {
  nn::GPT g = model(64);
  Tensor prompt = tokens(2, 6, 9);
  auto draw = [&](bool jit) {
    Generator gen(5);
    return g->generate(prompt, 12, {.top_k = 7, .jit = jit, .generator = &gen}).to_vector<int64_t>();
  };
  std::vector<int64_t> eager = draw(false);
  EXPECT_EQ(draw(true), eager);  // records the prompt's step, captures the decoding step
  EXPECT_EQ(draw(true), eager);  // captures the prompt's step
  int64_t replays = stats().jit_replays, compiled = stats().kernels_compiled;
  EXPECT_EQ(draw(true), eager);
  EXPECT_EQ(stats().jit_replays - replays, 12)
      << "every step of the call (the prompt's, 11 tokens') replayed";
  EXPECT_EQ(stats().kernels_compiled - compiled, 0);
  // training lets the kept steps go (they hold the parameters' buffers); an eager step of SGD binds
  // each parameter to a new buffer, so the old ones are freed
  std::weak_ptr<const ir::Node> old_weight = g->lm_head_weight().node();
  g->train();
  {
    Tensor loss = g->forward(prompt, tokens(2, 6, 10)).second;
    loss.backward();
    optim::SGD opt(g->parameters(), {.lr = 0.5});
    opt.step();
    g->zero_grad();
  }
  g->eval();
  EXPECT_TRUE(old_weight.expired()) << "the kept steps still hold the weights before the step";
  std::vector<int64_t> eager2 = draw(false);
  EXPECT_NE(eager2, eager);
  EXPECT_EQ(draw(true), eager2);
  EXPECT_EQ(draw(true), eager2);
}

// The captured step's replays draw what eager steps draw (jit = false: each step through the realize
// driver): the same tokens and logits, sampled from the same generator state, and with a longer
// prompt than the window holds at the start.
TEST(GptGenerate, JitAndEagerDrawTheSameTokens) {
  nn::GPT g = model();
  Tensor prompt = tokens(2, 5, 11);
  for (std::optional<int64_t> k : {std::optional<int64_t>(1), std::optional<int64_t>(7)}) {
    Generator ga(4), gb(4);
    Recorded jit = run(g, prompt, 14, {.top_k = k, .generator = &ga});
    Recorded eager = run(g, prompt, 14, {.top_k = k, .jit = false, .generator = &gb});
    EXPECT_EQ(jit.out.to_vector<int64_t>(), eager.out.to_vector<int64_t>()) << "top_k " << *k;
    ASSERT_EQ(jit.logits.size(), eager.logits.size());
    for (size_t s = 0; s < jit.logits.size(); s++)
      EXPECT_EQ(jit.logits[s], eager.logits[s]) << "top_k " << *k << " step " << s;
  }
}

// A one-token step with the cache writes each cache in place: one kernel per cache over the new
// column (B, H, 1, D), into the cache's own buffer, not a kernel over (B, H, max_len, D).
TEST(GptGenerate, DecodingStepWritesTheCachesInPlace) {
  const int64_t B = 2, H = 4, L = 32, D = 8;
  manual_seed(5);
  nn::MultiheadAttention attn(H * D, H);
  attn->eval();
  NoGradGuard no_grad;
  nn::KVCache cache{zeros({B, H, L, D}).contiguous().realize(), zeros({B, H, L, D}).contiguous().realize()};
  Tensor j = arange(L).reshape({1, 1, 1, L});
  for (int64_t t = 0; t < 3; t++) {
    const void* k_at = cache.k.node()->buffer->data;
    const void* v_at = cache.v.node()->buffer->data;
    Tensor col = tensor(std::vector<int64_t>{t}), x = randn({B, 1, H * D}).realize();
    kiln::testing::LaunchLog log;
    Tensor y = attn->forward(x, j <= t, &cache, col);
    realize({y, cache.k, cache.v});
    EXPECT_EQ(cache.k.node()->buffer->data, k_at) << "step " << t;
    EXPECT_EQ(cache.v.node()->buffer->data, v_at) << "step " << t;
    int writes = 0;
    for (auto& r : log.runs) {
      if (r.out != k_at && r.out != v_at) continue;
      writes++;
      EXPECT_EQ(r.loop_elems, B * H * D) << r.name;
    }
    EXPECT_EQ(writes, 2) << "step " << t;
  }
}
