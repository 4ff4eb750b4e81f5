// kiln::Jit: replayed training steps match eager ones, replays schedule and compile nothing, and
// misuse (other shapes, values baked at capture that change) fails with clear errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstring>

#include "frontend/graph.h"

using namespace kiln;

namespace {

struct Mlp {
  std::vector<Tensor> params;
  explicit Mlp(uint64_t seed) {
    manual_seed(seed);
    std::vector<int64_t> sizes = {20, 32, 32, 5};
    for (size_t i = 0; i + 1 < sizes.size(); i++) {
      params.push_back((randn({sizes[i + 1], sizes[i]}) * 0.2).requires_grad_());
      params.push_back((randn({sizes[i + 1]}) * 0.1).requires_grad_());
    }
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = x;
    for (size_t i = 0; i < params.size(); i += 2) {
      h = h.matmul(params[i].t()) + params[i + 1];
      if (i + 2 < params.size()) h = h.relu();
    }
    return F::cross_entropy(h, y);
  }
};

std::vector<std::vector<Tensor>> batches(int n, int64_t b = 16) {
  manual_seed(99);
  std::vector<std::vector<Tensor>> out;
  for (int i = 0; i < n; i++) out.push_back({randn({b, 20}).realize(), randint(0, 5, {b}).realize()});
  return out;
}

template <class Opt, class Options>
void expect_replay_matches_eager(Options options, int steps = 7) {
  auto data = batches(steps);
  Mlp eager(1), jitted(1);
  Opt eager_opt(eager.params, options), jit_opt(jitted.params, options);
  auto train = [](Mlp& m, optim::Optimizer& opt, const std::vector<Tensor>& in) {
    Tensor loss = m.loss(in[0], in[1]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
  Jit step([&](const std::vector<Tensor>& in) { return train(jitted, jit_opt, in); });
  int64_t schedules = 0, compiled = 0, replays = 0;  // during the calls that replay
  for (int i = 0; i < steps; i++) {
    Tensor want = train(eager, eager_opt, data[i])[0];
    bool replay = step.captured();
    Stats before = stats();
    Tensor got = step(data[i])[0];
    if (replay) {
      schedules += stats().schedules - before.schedules;
      compiled += stats().kernels_compiled - before.kernels_compiled;
      replays += stats().jit_replays - before.jit_replays;
    }
    EXPECT_EQ(got.item<float>(), want.item<float>()) << "loss at step " << i;
  }
  ASSERT_TRUE(step.captured());
  EXPECT_EQ(schedules, 0) << "replays must not schedule";
  EXPECT_EQ(compiled, 0) << "replays must not compile";
  EXPECT_GE(replays, 3);
  for (size_t p = 0; p < eager.params.size(); p++) {
    std::vector<float> a = eager.params[p].to_vector<float>(), b = jitted.params[p].to_vector<float>();
    std::vector<float> ga = eager.params[p].grad().to_vector<float>(),
                       gb = jitted.params[p].grad().to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); k++) {
      EXPECT_EQ(a[k], b[k]) << "parameter " << p << " element " << k;
      EXPECT_EQ(ga[k], gb[k]) << "gradient of parameter " << p << " element " << k;
    }
  }
}

}  // namespace

TEST(Jit, MlpAdamWReplayMatchesEager) {
  expect_replay_matches_eager<optim::AdamW>(optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
}

TEST(Jit, MlpSgdMomentumReplayMatchesEager) {
  expect_replay_matches_eager<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

namespace {
// A training step of m with opt under a Jit: captured at its second call, replayed at the third.
void expect_captured_at_the_second_call(Mlp& m, optim::Optimizer& opt) {
  auto data = batches(3);
  Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss = m.loss(in[0], in[1]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  });
  step(data[0]);
  EXPECT_FALSE(step.captured());
  step(data[1]);
  EXPECT_TRUE(step.captured());
  EXPECT_GT(step.num_launches(), 0u);
  int64_t replays = stats().jit_replays;
  step(data[2]);
  EXPECT_EQ(stats().jit_replays, replays + 1);
}
}  // namespace

TEST(Jit, CapturesAtTheSecondCallWhenStepsAgree) {
  Mlp m(2);
  optim::SGD sgd(m.params, {.lr = 0.1});
  expect_captured_at_the_second_call(m, sgd);
  // AdamW's moments are zeros in buffers before its first step: calls 1 and 2 record the same step
  Mlp a(3);
  optim::AdamW adam(a.params, {.lr = 1e-2, .weight_decay = 0.1});
  EXPECT_EQ(adam.state_dict().count("state.0.exp_avg"), 0u) << "no moments before a step";
  expect_captured_at_the_second_call(a, adam);
  EXPECT_EQ(adam.state_dict().count("state.0.exp_avg"), 1u);
}

TEST(Jit, LearningRateSchedulesReachReplays) {
  auto data = batches(8);
  Mlp eager(3), jitted(3);
  optim::AdamW eager_opt(eager.params, {.lr = 1e-2}), jit_opt(jitted.params, {.lr = 1e-2});
  optim::StepLR eager_sched(eager_opt, 2, 0.5), jit_sched(jit_opt, 2, 0.5);
  Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss = jitted.loss(in[0], in[1]);
    jit_opt.zero_grad();
    loss.backward();
    jit_opt.step();
    return std::vector<Tensor>{loss};
  });
  for (auto& in : data) {
    Tensor loss = eager.loss(in[0], in[1]);
    eager_opt.zero_grad();
    loss.backward();
    eager_opt.step();
    eager_sched.step();
    float got = step(in)[0].item<float>();
    jit_sched.step();
    EXPECT_EQ(got, loss.item<float>());
  }
  EXPECT_TRUE(step.captured());
  EXPECT_EQ(eager.params[0].to_vector<float>(), jitted.params[0].to_vector<float>());
}

TEST(Jit, EarlierResultsKeepTheirValues) {
  Tensor w = full({4}, 1.0f);
  Jit f([&](const std::vector<Tensor>& in) {
    w.assign_(w + in[0]);
    return std::vector<Tensor>{w * 2};
  });
  Tensor one = full({4}, 1.0f).realize();
  std::vector<Tensor> r;
  for (int i = 0; i < 5; i++) r.push_back(f({one})[0]);
  EXPECT_TRUE(f.captured());
  for (int i = 0; i < 5; i++) EXPECT_EQ(r[i].to_vector<float>()[0], 2.0f * static_cast<float>(i + 2)) << i;
  EXPECT_EQ(w.to_vector<float>()[3], 6.0f);
}

TEST(Jit, AChainDeeperThanTheLazyLimitIsReplayedWithTheRealizesItMakes) {
  // steps of two nodes make a graph 4.5 times deeper than kMaxLazyDepth: it is realized four times
  // inside the function and once at its end (each cut into kernels of bounded depth), and the replay
  // runs those kernels too
  const int steps = static_cast<int>(frontend::kMaxLazyDepth) * 9 / 4;
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor acc = in[0];
    for (int i = 0; i < steps; i++) acc = acc * 0.5 + in[0];
    return std::vector<Tensor>{acc};
  });
  for (int call = 0; call < 4; call++) {
    float x = 1.0f + static_cast<float>(call) / 3;
    float want = x;
    for (int i = 0; i < steps; i++) want = want * 0.5f + x;
    EXPECT_EQ(f({full({3}, x).realize()})[0].to_vector<float>(), std::vector<float>(3, want)) << call;
  }
  EXPECT_TRUE(f.captured());
  EXPECT_GE(f.num_launches(), 5u);
}

TEST(Jit, InputOfAnotherShapeOrDtypeIsAnError) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * 2).sum()}; });
  Tensor x = randn({8, 4}).realize();
  for (int i = 0; i < 3; i++) f({x});
  ASSERT_TRUE(f.captured());
  auto message = [&](const std::vector<Tensor>& in) -> std::string {
    try {
      f(in);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string shape = message({randn({4, 8})});
  EXPECT_NE(shape.find("input 0"), std::string::npos) << shape;
  EXPECT_NE(shape.find("(4, 8)"), std::string::npos) << shape;
  EXPECT_NE(shape.find("(8, 4)"), std::string::npos) << shape;
  std::string dtype = message({randn({8, 4}).to(DType::F64)});
  EXPECT_NE(dtype.find("f64"), std::string::npos) << dtype;
  EXPECT_NE(dtype.find("f32"), std::string::npos) << dtype;
  EXPECT_NE(message({x, x}).find("takes 1 inputs, got 2"), std::string::npos);
}

TEST(Jit, ANumberThatChangesEveryCallIsDetected) {
  // a learning rate decayed on the host and baked into the graph as a constant
  Tensor w = full({4}, 1.0f);
  double lr = 0.1;
  Jit f([&](const std::vector<Tensor>& in) {
    w.assign_(w - lr * in[0]);
    lr *= 0.5;
    return std::vector<Tensor>{w};
  });
  Tensor g = full({4}, 1.0f).realize();
  try {
    for (int i = 0; i < 10; i++) f({g});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changes from call to call"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(f.captured());
}

TEST(Jit, AValueMadeOnTheHostThatChangesIsDetected) {
  int calls = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    float step = static_cast<float>(++calls);
    return std::vector<Tensor>{in[0] * tensor({step})};
  });
  Tensor x = randn({4}).realize();
  EXPECT_THROW(
      {
        for (int i = 0; i < 10; i++) f({x});
      },
      Error);
}
