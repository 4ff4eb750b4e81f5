// kiln::optim against hand-written references of PyTorch's update equations (plain double loops):
// every optimizer and option combination, parameter groups, schedules, clipping, state_dict resume,
// no recompilation after the first steps, and errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <numbers>

#include "helpers.h"

using namespace kiln;
using Vec = std::vector<double>;

namespace {
constexpr int kSteps = 7;
const std::vector<Vec> kInit = {{0.5, -1.25, 2.0}, {0.3, -0.7, 1.1, 0.05}};
const std::vector<Shape> kShapes = {{3}, {2, 2}};

// The synthetic gradient of element i of parameter j at step t (1-based): varies in sign and size
// so that amsgrad's running max and momentum matter.
double G(size_t j, size_t i, int t) {
  return std::sin(1.3 * t + 0.7 * static_cast<double>(i) + 2.1 * static_cast<double>(j)) *
         (t % 3 == 0 ? 3.0 : 0.5);
}

std::vector<Tensor> make_params() {
  std::vector<Tensor> ps;
  for (size_t j = 0; j < kInit.size(); j++) ps.push_back(tensor(kInit[j], kShapes[j]).requires_grad_());
  return ps;
}
void set_grads(std::vector<Tensor>& ps, int t) {
  for (size_t j = 0; j < ps.size(); j++) {
    Vec g(kInit[j].size());
    for (size_t i = 0; i < g.size(); i++) g[i] = G(j, i, t);
    ps[j].set_grad(tensor(g, kShapes[j]));
  }
}
// Runs `steps` steps of the optimizer made by make on fresh parameters with the synthetic gradients.
std::vector<Vec> run(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make,
                     int steps = kSteps) {
  auto ps = make_params();
  auto opt = make(ps);
  for (int t = 1; t <= steps; t++) {
    opt->zero_grad();
    set_grads(ps, t);
    opt->step();
  }
  std::vector<Vec> out;
  for (auto& p : ps) out.push_back(p.to_vector<double>());
  return out;
}
void expect_near(const std::vector<Vec>& got, const std::vector<Vec>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); j++) {
    ASSERT_EQ(got[j].size(), want[j].size());
    for (size_t i = 0; i < got[j].size(); i++)
      EXPECT_NEAR(got[j][i], want[j][i], tol * std::max(1.0, std::abs(want[j][i])))
          << "param " << j << " elem " << i;
  }
}
template <class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
// lr at step t (1-based): constant unless a schedule is given
using LrFn = std::function<double(int)>;

// --- references: torch.optim update equations, element by element ---
std::vector<Vec> ref_sgd(optim::SGDOptions o, int steps = kSteps, LrFn lr = nullptr) {
  std::vector<Vec> p = kInit, buf = kInit;
  for (int t = 1; t <= steps; t++) {
    double a = lr ? lr(t) : o.lr;
    for (size_t j = 0; j < p.size(); j++)
      for (size_t i = 0; i < p[j].size(); i++) {
        double g = G(j, i, t);
        if (o.maximize) g = -g;
        if (o.weight_decay != 0) g += o.weight_decay * p[j][i];
        if (o.momentum != 0) {
          buf[j][i] = t == 1 ? g : o.momentum * buf[j][i] + (1 - o.dampening) * g;
          g = o.nesterov ? g + o.momentum * buf[j][i] : buf[j][i];
        }
        p[j][i] -= a * g;
      }
  }
  return p;
}
std::vector<Vec> ref_adam(optim::AdamOptions o, bool decoupled, int steps = kSteps) {
  std::vector<Vec> p = kInit, m = kInit, v = kInit, vmax = kInit;
  for (auto* s : {&m, &v, &vmax})
    for (auto& x : *s) std::fill(x.begin(), x.end(), 0.0);
  double b1 = o.betas[0], b2 = o.betas[1];
  for (int t = 1; t <= steps; t++)
    for (size_t j = 0; j < p.size(); j++)
      for (size_t i = 0; i < p[j].size(); i++) {
        double g = G(j, i, t);
        if (o.maximize) g = -g;
        if (decoupled)
          p[j][i] *= 1 - o.lr * o.weight_decay;
        else if (o.weight_decay != 0)
          g += o.weight_decay * p[j][i];
        m[j][i] = b1 * m[j][i] + (1 - b1) * g;
        v[j][i] = b2 * v[j][i] + (1 - b2) * g * g;
        double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        double vh = v[j][i];
        if (o.amsgrad) vh = vmax[j][i] = std::max(vmax[j][i], v[j][i]);
        double denom = std::sqrt(vh) / std::sqrt(bc2) + o.eps;
        p[j][i] -= o.lr / bc1 * m[j][i] / denom;
      }
  return p;
}
std::vector<Vec> ref_rmsprop(optim::RMSpropOptions o, int steps = kSteps) {
  std::vector<Vec> p = kInit, sq = kInit, ga = kInit, buf = kInit;
  for (auto* s : {&sq, &ga, &buf})
    for (auto& x : *s) std::fill(x.begin(), x.end(), 0.0);
  for (int t = 1; t <= steps; t++)
    for (size_t j = 0; j < p.size(); j++)
      for (size_t i = 0; i < p[j].size(); i++) {
        double g = G(j, i, t);
        if (o.maximize) g = -g;
        if (o.weight_decay != 0) g += o.weight_decay * p[j][i];
        sq[j][i] = o.alpha * sq[j][i] + (1 - o.alpha) * g * g;
        double avg;
        if (o.centered) {
          ga[j][i] = o.alpha * ga[j][i] + (1 - o.alpha) * g;
          avg = std::sqrt(sq[j][i] - ga[j][i] * ga[j][i]) + o.eps;
        } else {
          avg = std::sqrt(sq[j][i]) + o.eps;
        }
        if (o.momentum > 0) {
          buf[j][i] = o.momentum * buf[j][i] + g / avg;
          p[j][i] -= o.lr * buf[j][i];
        } else {
          p[j][i] -= o.lr * g / avg;
        }
      }
  return p;
}
std::vector<Vec> ref_adagrad(optim::AdagradOptions o, int steps = kSteps) {
  std::vector<Vec> p = kInit, sum = kInit;
  for (auto& x : sum) std::fill(x.begin(), x.end(), o.initial_accumulator_value);
  for (int t = 1; t <= steps; t++)
    for (size_t j = 0; j < p.size(); j++)
      for (size_t i = 0; i < p[j].size(); i++) {
        double g = G(j, i, t);
        if (o.maximize) g = -g;
        if (o.weight_decay != 0) g += o.weight_decay * p[j][i];
        double clr = o.lr / (1 + (t - 1) * o.lr_decay);
        sum[j][i] += g * g;
        p[j][i] -= clr * g / (std::sqrt(sum[j][i]) + o.eps);
      }
  return p;
}
template <class O, class Opts>
std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> maker(Opts o) {
  return [o](std::vector<Tensor> ps) { return std::make_unique<O>(std::move(ps), o); };
}
}  // namespace

TEST(OptimSGD, MatchesReference) {
  std::vector<optim::SGDOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.1, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true},
      {.lr = 0.02, .weight_decay = 0.1, .maximize = true},
      {.lr = 0.02, .momentum = 0.5, .dampening = 0.5, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    SCOPED_TRACE("case " + std::to_string(c));
    expect_near(run(maker<optim::SGD>(cases[c])), ref_sgd(cases[c]));
  }
  optim::SGDOptions d;
  EXPECT_EQ(d.lr, 1e-3);
  EXPECT_EQ(d.momentum, 0);
}

TEST(OptimAdam, MatchesReference) {
  std::vector<optim::AdamOptions> cases = {
      {.lr = 0.01},
      {.lr = 0.01, .weight_decay = 0.1},
      {.lr = 0.01, .amsgrad = true},
      {.lr = 0.03, .betas = {0.8, 0.9}, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = true, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    SCOPED_TRACE("case " + std::to_string(c));
    expect_near(run(maker<optim::Adam>(cases[c])), ref_adam(cases[c], false));
  }
  optim::AdamOptions d;
  EXPECT_EQ(d.lr, 1e-3);
  EXPECT_EQ(d.betas[0], 0.9);
  EXPECT_EQ(d.betas[1], 0.999);
  EXPECT_EQ(d.eps, 1e-8);
}

TEST(OptimAdamW, MatchesReference) {
  std::vector<optim::AdamWOptions> cases = {
      {.lr = 0.01},
      {.lr = 0.02, .weight_decay = 0.2, .amsgrad = true},
      {.lr = 0.02, .betas = {0.5, 0.7}, .eps = 1e-4, .weight_decay = 0, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    SCOPED_TRACE("case " + std::to_string(c));
    const auto& o = cases[c];
    optim::AdamOptions ao{.lr = o.lr,
                          .betas = o.betas,
                          .eps = o.eps,
                          .weight_decay = o.weight_decay,
                          .amsgrad = o.amsgrad,
                          .maximize = o.maximize};
    expect_near(run(maker<optim::AdamW>(o)), ref_adam(ao, true));
  }
  EXPECT_EQ(optim::AdamWOptions{}.weight_decay, 1e-2);
}

TEST(OptimRMSprop, MatchesReference) {
  std::vector<optim::RMSpropOptions> cases = {
      {},
      {.lr = 0.01, .momentum = 0.5},
      {.lr = 0.01, .centered = true},
      {.lr = 0.005, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1, .momentum = 0.7, .centered = true},
      {.lr = 0.005, .weight_decay = 0.01, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    SCOPED_TRACE("case " + std::to_string(c));
    expect_near(run(maker<optim::RMSprop>(cases[c])), ref_rmsprop(cases[c]));
  }
  optim::RMSpropOptions d;
  EXPECT_EQ(d.lr, 1e-2);
  EXPECT_EQ(d.alpha, 0.99);
}

TEST(OptimAdagrad, MatchesReference) {
  std::vector<optim::AdagradOptions> cases = {
      {},
      {.lr = 0.1, .lr_decay = 0.1, .weight_decay = 0.1, .initial_accumulator_value = 0.5},
      {.lr = 0.05, .eps = 1e-3, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); c++) {
    SCOPED_TRACE("case " + std::to_string(c));
    expect_near(run(maker<optim::Adagrad>(cases[c])), ref_adagrad(cases[c]));
  }
  EXPECT_EQ(optim::AdagradOptions{}.eps, 1e-10);
}

TEST(OptimGroups, PerGroupOptionsAndSkippedParams) {
  auto ps = make_params();
  optim::SGD opt({{.params = {ps[0]}, .options = {.lr = 0.1, .momentum = 0.9}},
                  {.params = {ps[1]}, .options = {.lr = 0.01}}});
  EXPECT_EQ(opt.num_groups(), 2u);
  EXPECT_EQ(opt.lr(1), 0.01);
  for (int t = 1; t <= 3; t++) {
    opt.zero_grad();
    set_grads(ps, t);
    opt.step();
  }
  auto a = ref_sgd({.lr = 0.1, .momentum = 0.9}, 3), b = ref_sgd({.lr = 0.01}, 3);
  expect_near({ps[0].to_vector<double>(), ps[1].to_vector<double>()}, {a[0], b[1]});
  // a parameter without a gradient is left alone, and its step count does not advance
  Vec before = ps[1].to_vector<double>();
  opt.zero_grad();
  ps[0].set_grad(ones_like(ps[0]));
  opt.step();
  EXPECT_EQ(ps[1].to_vector<double>(), before);
  EXPECT_EQ(opt.step_count(0), 4);
  EXPECT_EQ(opt.step_count(1), 3);
  EXPECT_TRUE(ps[0].is_leaf());
  EXPECT_TRUE(ps[0].requires_grad());
}

TEST(OptimSGD, QuadraticLossWithPendingBackwardInOneSchedule) {
  // loss = sum((w - c)^2): the backward graph is realized by step() together with the update
  Tensor w = tensor(Vec{1, -2, 3}).requires_grad_();
  Tensor c = tensor(Vec{0.5, 0.5, 0.5});
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  Vec p = {1, -2, 3}, buf(3);
  for (int t = 1; t <= 5; t++) {
    opt.zero_grad();
    ((w - c) * (w - c)).sum().backward();
    int64_t schedules = stats().schedules;
    opt.step();
    EXPECT_EQ(stats().schedules - schedules, 1);
    for (int i = 0; i < 3; i++) {
      double g = 2 * (p[i] - 0.5);
      buf[i] = t == 1 ? g : 0.9 * buf[i] + g;
      p[i] -= 0.1 * (g + 0.9 * buf[i]);
    }
  }
  expect_near({w.to_vector<double>()}, {p});
}

TEST(OptimSchedules, LrSequences) {
  auto ps = make_params();
  optim::SGD opt(ps, {.lr = 0.5});
  auto check = [&](optim::LRScheduler& s, const std::function<double(int64_t)>& want, int n) {
    for (int e = 0; e < n; e++) {
      EXPECT_NEAR(opt.lr(), want(e), 1e-12) << "epoch " << e;
      EXPECT_EQ(s.last_epoch(), e);
      s.step();
    }
  };
  {
    opt.set_lr(0.5);
    optim::StepLR s(opt, 3, 0.5);
    check(
        s, [](int64_t e) { return 0.5 * std::pow(0.5, e / 3); }, 10);
  }
  {
    opt.set_lr(0.5);
    optim::LinearLR s(opt, 0.25, 1.0, 4);
    const double want[] = {0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5};
    check(
        s, [&](int64_t e) { return want[e]; }, 7);
  }
  {
    opt.set_lr(0.5);
    optim::CosineAnnealingLR s(opt, 6, 0.1);
    check(
        s, [](int64_t e) { return 0.1 + 0.4 * (1 + std::cos(std::numbers::pi * e / 6)) / 2; }, 8);
  }
  {
    opt.set_lr(0.5);
    optim::CosineWarmupLR s(opt, 3, 9, 0.05);
    const double pi = std::numbers::pi;
    const double want[] = {0.5 / 3,
                           1.0 / 3,
                           0.5,
                           0.05 + 0.45 * (1 + std::cos(pi * 0 / 6)) / 2,
                           0.05 + 0.45 * (1 + std::cos(pi * 1 / 6)) / 2,
                           0.05 + 0.45 * (1 + std::cos(pi * 2 / 6)) / 2,
                           0.05 + 0.45 * (1 + std::cos(pi * 3 / 6)) / 2,
                           0.05 + 0.45 * (1 + std::cos(pi * 4 / 6)) / 2,
                           0.05 + 0.45 * (1 + std::cos(pi * 5 / 6)) / 2,
                           0.05,
                           0.05,
                           0.05};
    check(
        s, [&](int64_t e) { return want[e]; }, 12);
  }
}

// A schedule shortened mid-run (a time budget) keeps its base lr: the cosine continues from the
// current epoch over the new length (re-making the schedule would take the warmed-up lr as base).
TEST(OptimSchedules, CosineWarmupSetTotalSteps) {
  auto ps = make_params();
  optim::SGD opt(ps, {.lr = 0.5});
  optim::CosineWarmupLR s(opt, 4, 100, 0.05);
  for (int i = 0; i < 6; i++) s.step();  // epoch 6: past the warmup
  s.set_total_steps(14);
  EXPECT_EQ(s.total_steps(), 14);
  const double pi = std::numbers::pi;
  EXPECT_NEAR(opt.lr(), 0.05 + 0.45 * (1 + std::cos(pi * 2 / 10)) / 2, 1e-12);
  for (int i = 0; i < 8; i++) s.step();
  EXPECT_NEAR(opt.lr(), 0.05, 1e-12);
  expect_error([&] { s.set_total_steps(4); },
               "set_total_steps: total_steps must be greater than warmup_steps");
}

TEST(OptimSchedules, ScheduledLrReachesTheUpdate) {
  // SGD with momentum under StepLR: the lr applied at step t is the schedule's lr at epoch t-1
  auto ps = make_params();
  optim::SGD opt(ps, {.lr = 0.2, .momentum = 0.9});
  optim::StepLR sched(opt, 2, 0.5);
  for (int t = 1; t <= kSteps; t++) {
    opt.zero_grad();
    set_grads(ps, t);
    opt.step();
    sched.step();
  }
  auto want =
      ref_sgd({.lr = 0.2, .momentum = 0.9}, kSteps, [](int t) { return 0.2 * std::pow(0.5, (t - 1) / 2); });
  expect_near({ps[0].to_vector<double>(), ps[1].to_vector<double>()}, want);
}

TEST(OptimClip, ClipGradNorm) {
  auto ps = make_params();
  set_grads(ps, 3);
  double sq = 0, mx = 0;
  std::vector<Vec> g(2);
  for (size_t j = 0; j < 2; j++)
    for (size_t i = 0; i < kInit[j].size(); i++) {
      g[j].push_back(G(j, i, 3));
      sq += G(j, i, 3) * G(j, i, 3);
      mx = std::max(mx, std::abs(G(j, i, 3)));
    }
  double total = std::sqrt(sq);
  Tensor n = optim::clip_grad_norm_(ps, 1.0);
  EXPECT_NEAR(n.item<double>(), total, 1e-12);
  double coef = 1.0 / (total + 1e-6);
  ASSERT_LT(coef, 1);
  for (size_t j = 0; j < 2; j++) {
    Vec want = g[j];
    for (auto& x : want) x *= coef;
    kiln::testing::expect_values(ps[j].grad(), want, 1e-12, 1e-15);
  }
  // a large max_norm leaves the gradients unchanged
  set_grads(ps, 3);
  EXPECT_NEAR(optim::clip_grad_norm_(ps, 100.0).item<double>(), total, 1e-12);
  kiln::testing::expect_values(ps[0].grad(), g[0], 0, 0);
  // infinity and 1 norms
  EXPECT_NEAR(optim::clip_grad_norm_(ps, 100.0, std::numeric_limits<double>::infinity()).item<double>(), mx,
              1e-12);
  set_grads(ps, 3);
  double l1 = 0;
  for (auto& v : g)
    for (double x : v) l1 += std::abs(x);
  EXPECT_NEAR(optim::clip_grad_norm_(ps, 0.5, 1).item<double>(), l1, 1e-12);
  kiln::testing::expect_values(ps[1].grad(),
                               {g[1][0] * 0.5 / (l1 + 1e-6), g[1][1] * 0.5 / (l1 + 1e-6),
                                g[1][2] * 0.5 / (l1 + 1e-6), g[1][3] * 0.5 / (l1 + 1e-6)},
                               1e-12, 1e-15);
}

TEST(OptimStateDict, ResumeMatchesUninterruptedRun) {
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  std::vector<std::pair<std::string, Make>> makers = {
      {"SGD", maker<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true})},
      {"Adam", maker<optim::Adam>(optim::AdamOptions{.lr = 0.01, .amsgrad = true})},
      {"AdamW", maker<optim::AdamW>(optim::AdamWOptions{.lr = 0.01})},
      {"RMSprop", maker<optim::RMSprop>(optim::RMSpropOptions{.momentum = 0.5, .centered = true})},
      {"Adagrad", maker<optim::Adagrad>(optim::AdagradOptions{.lr_decay = 0.1})},
  };
  for (auto& [name, make] : makers) {
    SCOPED_TRACE(name);
    auto full = run(make, kSteps);
    // stop after 3 steps (with a cosine schedule state in lr), save, restore into new objects
    auto ps = make_params();
    auto opt = make(ps);
    for (int t = 1; t <= 3; t++) {
      opt->zero_grad();
      set_grads(ps, t);
      opt->step();
    }
    auto sd = opt->state_dict();
    EXPECT_EQ(sd.at("step").item<int64_t>(), 3);
    EXPECT_EQ(sd.at("state.1.step").item<int64_t>(), 3);
    EXPECT_TRUE(sd.count("group.0.lr"));
    if (name == "Adam") {
      EXPECT_TRUE(sd.count("state.0.exp_avg"));
      EXPECT_TRUE(sd.count("state.1.max_exp_avg_sq"));
      EXPECT_EQ(sd.at("state.1.exp_avg").shape(), (Shape{2, 2}));
    }
    // a later step of the old optimizer does not change the saved state
    Vec saved = name == "Adagrad" ? sd.at("state.0.sum").to_vector<double>() : Vec{};
    opt->zero_grad();
    set_grads(ps, 4);
    opt->step();
    if (name == "Adagrad") {
      EXPECT_EQ(sd.at("state.0.sum").to_vector<double>(), saved);
    }

    std::vector<Tensor> ps2;
    auto mid = run(make, 3);
    for (size_t j = 0; j < mid.size(); j++) ps2.push_back(tensor(mid[j], kShapes[j]).requires_grad_());
    auto opt2 = make(ps2);
    opt2->load_state_dict(sd);
    for (int t = 4; t <= kSteps; t++) {
      opt2->zero_grad();
      set_grads(ps2, t);
      opt2->step();
    }
    for (size_t j = 0; j < ps2.size(); j++) EXPECT_EQ(ps2[j].to_vector<double>(), full[j]) << "param " << j;
  }
}

TEST(OptimCompile, NoNewKernelsAfterTheFirstSteps) {
  // Adam with amsgrad, weight decay, a schedule changing lr every step and a pending backward
  Tensor w = tensor(Vec{0.5, -1, 2, 0.25, 1.5, -0.75}, {2, 3}).requires_grad_();
  Tensor b = tensor(Vec{0.1, -0.2}).requires_grad_();
  Tensor x = tensor(Vec{1, 2, -1, 0.5, 0, 3, -2, 1, 1}, {3, 3});
  optim::AdamW opt({w, b}, {.lr = 0.01, .amsgrad = true});
  optim::CosineWarmupLR sched(opt, 2, 10, 1e-4);
  // a fresh program cache, so the first steps really compile
  std::string old_dir = settings().cache_dir;
  settings().cache_dir = ::testing::TempDir() + "kiln_optim_cache_" + std::to_string(::getpid());
  clear_memory_cache();
  int64_t compiled_before = stats().kernels_compiled, compiled_after_2 = 0;
  for (int t = 1; t <= 10; t++) {
    opt.zero_grad();
    Tensor y = w.matmul(x.t()).tanh() + b.unsqueeze(1);
    (y * y).mean().backward();
    opt.step();
    sched.step();
    if (t == 2) compiled_after_2 = stats().kernels_compiled;
  }
  std::filesystem::remove_all(settings().cache_dir);
  settings().cache_dir = old_dir;
  EXPECT_GT(compiled_after_2, compiled_before);
  EXPECT_EQ(stats().kernels_compiled, compiled_after_2);
  for (double v : w.to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
}

TEST(OptimCompile, F32ParametersStayF32) {
  Tensor w = ones({4}).requires_grad_();
  optim::Adam opt({w}, {.lr = 0.1});
  for (int t = 0; t < 3; t++) {
    opt.zero_grad();
    (w * w).sum().backward();
    opt.step();
  }
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_NEAR(w.to_vector<float>()[0], 0.7, 0.01);  // three steps of ~lr each
}

TEST(OptimErrors, InvalidOptions) {
  auto ps = make_params();
  expect_error([&] { optim::Adam(ps, {.lr = -0.1}); }, "optim::Adam: invalid learning rate: -0.1");
  expect_error(
      [&] {
        optim::Adam(ps, {.betas = {1.0, 0.999}});
      },
      "optim::Adam: invalid beta parameter at index 0: 1");
  expect_error(
      [&] {
        optim::AdamW(ps, {.betas = {0.9, -0.5}});
      },
      "optim::AdamW: invalid beta parameter at index 1: -0.5");
  expect_error([&] { optim::AdamW(ps, {.eps = -1}); }, "optim::AdamW: invalid epsilon value: -1");
  expect_error([&] { optim::Adam(ps, {.weight_decay = -1}); }, "invalid weight_decay value: -1");
  expect_error([&] { optim::SGD(ps, {.lr = 0.1, .nesterov = true}); },
               "optim::SGD: Nesterov momentum requires a momentum");
  expect_error([&] { optim::SGD(ps, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               "zero dampening");
  expect_error([&] { optim::SGD(ps, {.momentum = -0.9}); }, "optim::SGD: invalid momentum value: -0.9");
  expect_error([&] { optim::RMSprop(ps, {.alpha = -0.5}); }, "optim::RMSprop: invalid alpha value: -0.5");
  expect_error([&] { optim::Adagrad(ps, {.lr_decay = -1}); }, "optim::Adagrad: invalid lr_decay value: -1");
  expect_error([&] { optim::Adagrad(ps, {.initial_accumulator_value = -2}); },
               "initial_accumulator_value value: -2");
  expect_error([&] { optim::SGD({arange(3)}); }, "optim::SGD: parameters must be floating point");
  optim::SGD opt(ps, {.lr = 0.1});
  expect_error([&] { opt.set_lr(-1); }, "optim::SGD: invalid learning rate: -1");
  expect_error([&] { optim::StepLR(opt, 0); }, "StepLR: step_size must be positive");
  expect_error([&] { optim::CosineWarmupLR(opt, 10, 5); }, "total_steps must be greater than warmup_steps");
  // load_state_dict: missing keys and wrong shapes
  optim::Adam a(ps), b(ps);
  set_grads(ps, 1);
  a.step();
  auto sd = a.state_dict();
  auto missing = sd;
  missing.erase("state.1.exp_avg_sq");
  expect_error([&] { b.load_state_dict(missing); },
               "optim::Adam: load_state_dict: missing key \"state.1.exp_avg_sq\"");
  auto wrong = sd;
  wrong["state.0.exp_avg"] = zeros({5}, {.dtype = DType::F64});
  expect_error([&] { b.load_state_dict(wrong); },
               "\"state.0.exp_avg\" has shape (5,), the parameter has shape (3,)");
  EXPECT_EQ(b.step_count(0), 0);  // nothing changed by a failed load
}
