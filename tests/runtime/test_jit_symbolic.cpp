// kiln::Jit over symbolic sizes: a step captured with a variable dim replays at other values of it
// (bound from the inputs' shapes) with no scheduling or compiling, and matches eager steps.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <map>
#include <vector>

#include "helpers.h"

using namespace kiln;

namespace {

using kiln::testing::error_of;

bool allclose(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.shape() != want.shape()) return false;
  std::vector<float> a = got.to(DType::F32).to_vector<float>(), b = want.to(DType::F32).to_vector<float>();
  for (size_t k = 0; k < a.size(); k++)
    if (!(std::abs(a[k] - b[k]) <= atol + rtol * std::abs(b[k]))) return false;
  return true;
}

// One optimizer step on the loss `loss_of` computes; returns that loss.
template <class LossOf>
Tensor train_step(optim::Optimizer& opt, LossOf&& loss_of) {
  Tensor loss = loss_of();
  opt.zero_grad();
  loss.backward();
  opt.step();
  return loss;
}

struct Model {
  std::vector<Tensor> params;
  explicit Model(uint64_t seed) {
    manual_seed(seed);
    params = {(randn({16, 12}) * 0.3).requires_grad_(), (randn({16}) * 0.1).requires_grad_(),
              (randn({5, 16}) * 0.3).requires_grad_(), (randn({5}) * 0.1).requires_grad_()};
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = (x.matmul(params[0].t()) + params[1]).relu();
    return F::cross_entropy(h.matmul(params[2].t()) + params[3], y);
  }
};

// Training steps at batch sizes that change every call (B symbolic): the captured step replays for
// each of them, compiles and schedules nothing, and tracks the same model trained eagerly.
TEST(JitSymbolic, TrainingStepReplaysAtEveryBatchSize) {
  kiln::testing::TempCache cache("kiln_jit_symbolic");
  Var B("B", 1, 32);
  Model eager(5), jitted(5);
  optim::AdamW eager_opt(eager.params, {.lr = 1e-2}), jit_opt(jitted.params, {.lr = 1e-2});
  auto train = [](const Model& m, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
    return train_step(opt, [&] { return m.loss(x, y); });
  };
  Jit step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{train(jitted, jit_opt, in[0], in[1])};
  });
  std::vector<int64_t> sizes{8, 8, 5, 32, 1, 17, 8, 3};
  int64_t compiled = 0, schedules = 0, replays = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    manual_seed(100 + i);
    Tensor x = randn({sizes[i], 12}).realize(), y = randint(0, 5, {sizes[i]}).realize();
    float want = train(eager, eager_opt, x, y).item<float>();
    bool replay = step.captured();
    Stats before = stats();
    Tensor got = step({x.symbolic(0, B), y.symbolic(0, B)})[0];
    if (replay) {
      compiled += stats().kernels_compiled - before.kernels_compiled;
      schedules += stats().schedules - before.schedules;
      replays += stats().jit_replays - before.jit_replays;
    }
    EXPECT_NEAR(got.item<float>(), want, 1e-5 * std::abs(want) + 1e-6)
        << "loss at step " << i << ", B = " << sizes[i];
  }
  ASSERT_TRUE(step.captured());
  EXPECT_EQ(replays, 6);
  EXPECT_EQ(compiled, 0) << "replays at other batch sizes must not compile";
  EXPECT_EQ(schedules, 0) << "replays must not schedule";
  for (size_t p = 0; p < eager.params.size(); p++) {
    std::vector<float> a = eager.params[p].to_vector<float>(), b = jitted.params[p].to_vector<float>();
    for (size_t k = 0; k < a.size(); k++)
      EXPECT_NEAR(a[k], b[k], 1e-5) << "parameter " << p << " element " << k;
  }
}

// A returned tensor with a symbolic dim comes back at the replay's size, and works as a symbolic
// input of later graphs.
TEST(JitSymbolic, ReturnsTensorsOfTheReplaysSize) {
  Var T("T", 1, 64);
  Tensor w = randn({6}).realize();
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    return std::vector<Tensor>{x * w + x.sum(0, true), (x * x).sum(0)};
  });
  for (int64_t t : {4, 4, 9, 1, 64, 2}) {
    manual_seed(static_cast<uint64_t>(t));
    Tensor x = randn({t, 6}).realize();
    auto out = f({x.symbolic(0, T)});
    Tensor want0 = x * w + x.sum(0, true), want1 = (x * x).sum(0);
    ASSERT_EQ(out[0].shape(), (Shape{t, 6}));
    ASSERT_EQ(out[1].shape(), (Shape{6}));
    EXPECT_TRUE(allclose(out[0], want0, 1e-5, 1e-6)) << "T = " << t;
    EXPECT_TRUE(allclose(out[1], want1, 1e-5, 1e-6)) << "T = " << t;
    EXPECT_TRUE(allclose((out[0] * 2).sum(0), (want0 * 2).sum(0), 1e-5, 1e-5)) << "T = " << t;
  }
  EXPECT_TRUE(f.captured());
}

// A variable that no input's shape gives (the function marks a dim itself) cannot be bound by a
// replay: the step runs uncaptured, with right results.
TEST(JitSymbolic, AVariableNoInputGivesIsNotCaptured) {
  Var N("N", 1, 16);
  int64_t n = 3;
  Jit f([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].slice(0, 0, n).contiguous().symbolic(0, N).sum(0) * 2};
  });
  Tensor x = randn({16, 3}).realize();
  for (int64_t k : {3, 3, 5, 5, 7}) {
    n = k;
    EXPECT_TRUE(allclose(f({x})[0], x.slice(0, 0, k).sum(0) * 2, 1e-5, 1e-6)) << "n = " << k;
  }
  EXPECT_FALSE(f.captured());
}

// A step through a node whose runner takes concrete sizes (the tile layer norm over a symbolic
// dim) is not captured: replaying it at other sizes would compute the recorded rows. Every call
// runs as recorded and matches eager calls.
TEST(JitSymbolic, LayerNormRunnerOverASymbolicDimIsNotCaptured) {
  struct Mode {
    std::string was = settings().layernorm;
    Mode() { settings().layernorm = "tile"; }
    ~Mode() { settings().layernorm = was; }
  } mode;
  Var T("T", 1, 64);
  Tensor w = randn({6}).realize(), b = randn({6}).realize();
  auto fn = [&](const Tensor& x) { return (F::layer_norm(x * 2, {6}, w, b) * x).sum(0); };
  Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; });
  for (int64_t t : {4, 4, 9, 1, 64, 2}) {
    manual_seed(static_cast<uint64_t>(t));
    Tensor x = randn({t, 6}).realize();
    Tensor got = f({x.symbolic(0, T)})[0];
    EXPECT_TRUE(allclose(got, fn(x), 1e-4, 1e-5)) << "T = " << t;
  }
  EXPECT_FALSE(f.captured());
}

// A GPT training step whose batch size changes at every call, from the first: the recordings at
// two sizes are the same step, so it is captured, and its replays match eager steps. The batches
// are all marked symbolic before the first call (the variable was last given another size than
// the call's: its reshapes of B * 8 rows back to (B, 8) still place B).
TEST(JitSymbolic, GptStepAlternatingBatchSizesIsCaptured) {
  nn::GPTConfig c{
      .vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16, .dropout = 0, .bias = true};
  manual_seed(3);
  nn::GPT jitted(c);
  manual_seed(3);
  nn::GPT eager(c);
  optim::AdamW jit_opt(jitted->parameters(), {.lr = 1e-2}), eager_opt(eager->parameters(), {.lr = 1e-2});
  auto train = [](nn::GPT& m, optim::AdamW& opt, const Tensor& x, const Tensor& y) {
    return train_step(opt, [&] { return m(x, y).second; });
  };
  Jit step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{train(jitted, jit_opt, in[0], in[1])};
  });
  Var B("B", 1, 8);
  std::map<int64_t, std::vector<Tensor>> batches;  // x, y and their symbolic marks
  for (int64_t b : {4, 3, 7}) {
    manual_seed(static_cast<uint64_t>(b));
    Tensor x = randint(0, 11, {b, 8}).realize(), y = randint(0, 11, {b, 8}).realize();
    batches[b] = {x, y, x.symbolic(0, B), y.symbolic(0, B)};
  }
  for (int64_t b : {4, 3, 4, 3, 4, 3, 7, 4}) {
    const std::vector<Tensor>& in = batches.at(b);
    float want = train(eager, eager_opt, in[0], in[1]).item<float>();
    float got = step({in[2], in[3]})[0].item<float>();
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "B = " << b;
  }
  EXPECT_TRUE(step.captured());
}

TEST(JitSymbolic, ReplayWithoutTheSymbolicDimIsAnError) {
  Var T("T", 1, 8);
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 3}; });
  Tensor x = randn({4, 2}).realize();
  f({x.symbolic(0, T)});
  f({x.symbolic(0, T)});
  ASSERT_TRUE(f.captured());
  std::string e = error_of([&] { f({randn({5, 2})}); });
  EXPECT_NE(e.find("captured with (T, 2)"), std::string::npos) << e;
  EXPECT_EQ(f({randn({7, 2}).symbolic(0, T)})[0].shape(), (Shape{7, 2}));
}

}  // namespace
