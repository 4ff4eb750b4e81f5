// An optimizer step over many parameters runs in a few kernels (horizontal fusion of the
// per-parameter updates, schedule/horizontal_fusion.cpp) with the bits of one kernel per parameter:
// Adam, AdamW (+amsgrad), SGD with momentum, with and without clip_grad_norm_, parameters of 0, 1,
// odd and vector-multiple sizes and of several dtypes, eagerly and under kiln::Jit.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <functional>
#include <memory>

#include "helpers.h"
#include "hfuse_scope.h"

using namespace kiln;

namespace {

using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

template <class O, class Options>
Make maker(Options o) {
  return [o](std::vector<Tensor> ps) { return std::make_unique<O>(std::move(ps), o); };
}

const std::vector<Shape> kShapes = {{0}, {1}, {3}, {16}, {17}, {5, 7}, {64, 33}, {4, 4, 4}, {1}, {250}};

struct Trained {
  std::vector<std::vector<double>> params;
  int64_t step_kernels = 0;  // kernels of the last step
};

// Steps of the optimizer on fresh parameters (mixed dtypes: f32, a bf16 and an f64 one) with
// gradients of a loss, so that each step's schedule holds the backward too.
Trained train(const Make& make, bool hfuse, double clip, int steps = 4) {
  kiln::testing::HFuse scope(hfuse);
  std::vector<Tensor> ps;
  for (size_t j = 0; j < kShapes.size(); j++) {
    DType t = j == 3 ? DType::BF16 : j == 6 ? DType::F64 : DType::F32;
    ps.push_back(kiln::testing::random_tensor(kShapes[j], t, -1, 1, 40 + j).requires_grad_());
  }
  auto opt = make(ps);
  Trained out;
  for (int s = 1; s <= steps; s++) {
    opt->zero_grad();
    Tensor loss = zeros({});
    for (size_t j = 0; j < ps.size(); j++)
      loss = loss + ((ps[j] * (0.5 + 0.1 * static_cast<double>(s + j))).sin() * ps[j]).sum().to(DType::F32);
    loss.backward();
    if (clip > 0) optim::clip_grad_norm_(ps, clip);
    int64_t before = stats().kernels_run;
    opt->step();
    out.step_kernels = stats().kernels_run - before;
  }
  for (auto& p : ps) out.params.push_back(p.to_vector<double>());
  return out;
}

std::vector<std::pair<std::string, Make>> makers() {
  return {
      {"Adam", maker<optim::Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01})},
      {"AdamW", maker<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"AdamW amsgrad", maker<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .amsgrad = true})},
      {"SGD momentum", maker<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true})},
  };
}

}  // namespace

TEST(OptimMultiTensor, StepIsBitIdenticalToOneKernelPerParameter) {
  for (auto& [name, make] : makers())
    for (double clip : {0.0, 0.5}) {
      SCOPED_TRACE(name + (clip > 0 ? " with clip_grad_norm_" : ""));
      Trained fused = train(make, true, clip), apart = train(make, false, clip);
      ASSERT_EQ(fused.params.size(), apart.params.size());
      for (size_t j = 0; j < fused.params.size(); j++)
        EXPECT_EQ(fused.params[j], apart.params[j]) << "param " << j;
      // the updates of the 9 parameters with elements take fewer kernels than one each (the step's
      // schedule holds the backward's kernels too)
      EXPECT_LE(fused.step_kernels + 5, apart.step_kernels)
          << fused.step_kernels << " kernels fused, " << apart.step_kernels << " apart";
    }
}

TEST(OptimMultiTensor, ManyParametersStepInAFewKernels) {
  // 40 parameters; their gradients come from outside the step (set_grad), so the step's schedule is
  // the updates, the Adam step counters and (with clipping) the norm; grouped in every realize
  kiln::testing::HFuse scope(true);
  std::vector<Tensor> ps;
  for (int j = 0; j < 40; j++)
    ps.push_back(kiln::testing::random_tensor({3 + j, 5}, DType::F32, -1, 1, j).requires_grad_());
  optim::AdamW opt(ps, {.lr = 1e-3, .weight_decay = 0.1});
  for (int s = 0; s < 3; s++) {
    for (size_t j = 0; j < ps.size(); j++)
      ps[j].set_grad(kiln::testing::random_tensor(ps[j].shape(), DType::F32, -1, 1, 100 + j + s).realize());
    if (s == 2) optim::clip_grad_norm_(ps, 1.0);
    int64_t before = stats().kernels_run;
    opt.step();
    int64_t kernels = stats().kernels_run - before;
    if (s < 2) {
      EXPECT_LE(kernels, 6);
    }
    // the clip coefficient is applied in the update kernel: what clipping adds is one norm reduce
    // per gradient and the total, no rescaling kernel per parameter
    if (s == 2) {
      EXPECT_LE(kernels, 40 + 8);
    }
  }
}

TEST(OptimMultiTensor, JittedStepReplaysTheFusedKernels) {
  // a jitted step of an MLP with AdamW and clipping: the replay runs fewer kernels than without the
  // fusion, with the same bits
  auto launches = [](bool hfuse, std::vector<float>* out) {
    kiln::testing::HFuse scope(hfuse);
    manual_seed(3);
    std::vector<Tensor> ps;
    for (int64_t in : {12, 24, 24}) {
      ps.push_back((randn({24, in}) * 0.2).requires_grad_());
      ps.push_back((randn({24}) * 0.1).requires_grad_());
    }
    optim::AdamW opt(ps, {.lr = 1e-2, .weight_decay = 0.1});
    Jit step([&](const std::vector<Tensor>& in) {
      Tensor h = in[0];
      for (size_t i = 0; i < ps.size(); i += 2) h = (h.matmul(ps[i].t()) + ps[i + 1]).tanh();
      Tensor loss = (h * h).mean();
      opt.zero_grad();
      loss.backward();
      optim::clip_grad_norm_(ps, 0.1);
      opt.step();
      return std::vector<Tensor>{loss};
    });
    manual_seed(4);
    int64_t replayed = 0;  // kernels the last call (a replay) ran
    for (int i = 0; i < 4; i++) {
      Tensor x = randn({8, 12}).realize();
      int64_t before = stats().kernels_run;
      step({x});
      replayed = stats().kernels_run - before;
    }
    for (auto& p : ps) {
      auto v = p.to_vector<float>();
      out->insert(out->end(), v.begin(), v.end());
    }
    EXPECT_TRUE(step.captured());
    return replayed;
  };
  std::vector<float> fused, apart;
  int64_t n_fused = launches(true, &fused), n_apart = launches(false, &apart);
  EXPECT_LT(n_fused, n_apart);
  EXPECT_EQ(fused, apart);
}
