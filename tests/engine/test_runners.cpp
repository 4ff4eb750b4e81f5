// Runners (src/engine/runners.h): KILN_DEBUG=3 names the runner of every kernel; the tile layer norm
// runner (KILN_LAYERNORM=tile) against the float64 reference interpreter and finite differences,
// the composite where no runner takes the node (the ref device, f64), and a GPT training step
// captured by kiln::Jit whose replays run the tile programs, matching the generated kernels; the
// same step on a GPU (TileCudaRunner, skipped without one).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <regex>

#include "engine/interpreter.h"
#include "helpers.h"

namespace kiln::testing {
namespace {

namespace F = nn::functional;

// Sets settings().layernorm (and optionally the debug level) for one scope.
struct Mode {
  explicit Mode(const char* layernorm, int debug = settings().debug)
      : prev(settings().layernorm), prev_debug(settings().debug) {
    settings().layernorm = layernorm;
    settings().debug = debug;
  }
  ~Mode() {
    settings().layernorm = prev;
    settings().debug = prev_debug;
  }
  std::string prev;
  int prev_debug;
};

// A layer norm's input x (N, C), weight, bias and a weighting r of its output, seeds from `seed` on;
// x, w and b require gradients.
struct LayerNormInputs {
  Tensor x, w, b, r;
  LayerNormInputs(int64_t N, int64_t C, uint64_t seed)
      : x(random_tensor({N, C}, DType::F32, -1, 2, seed)),
        w(random_tensor({C}, DType::F32, 0.5, 1.5, seed + 1)),
        b(random_tensor({C}, DType::F32, -1, 1, seed + 2)),
        r(random_tensor({N, C}, DType::F32, -1, 1, seed + 3)) {
    x.requires_grad_(), w.requires_grad_(), b.requires_grad_();
  }
};

double worst(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double w = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); i++) w = std::max(w, std::fabs(got[i] - want[i]));
  return w;
}

TEST(Runners, DebugNamesTheRunnerOfEachKernel) {
  Mode m("tile", 3);
  Tensor x = random_tensor({6, 40}, DType::F32, -1, 1, 1), w = random_tensor({40}, DType::F32, 0.5, 1.5, 2);
  Tensor b = random_tensor({40}, DType::F32, -1, 1, 3);
  x.realize(), w.realize(), b.realize();
  ::testing::internal::CaptureStderr();
  Tensor y = (F::layer_norm(x, {40}, w, b) * 2).sum();
  y.realize();
  std::string err = ::testing::internal::GetCapturedStderr();
  std::regex line("kiln: runner (\\S+) -> ([^\\n]+)\\n");
  std::vector<std::pair<std::string, std::string>> got;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it)
    got.push_back({(*it)[1], (*it)[2]});
  // the layer norm's forward, then the generated kernels of * 2 and the sum
  ASSERT_GE(got.size(), 2u) << err;
  EXPECT_EQ(got[0], std::make_pair(std::string("tile_layernorm_fwd_6_40"), std::string("tile"))) << err;
  for (size_t i = 1; i < got.size(); i++) EXPECT_EQ(got[i].second, "generated") << err;
}

TEST(Runners, DefaultLayerNormMakesNoLayerNormNodes) {
  Mode m("generated", 3);
  Tensor x = random_tensor({6, 40}, DType::F32, -1, 1, 1);
  x.realize();
  ::testing::internal::CaptureStderr();
  F::layer_norm(x, {40}).realize();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("tile"), std::string::npos) << err;
  EXPECT_NE(err.find("-> generated"), std::string::npos) << err;
}

// y = layer_norm(x, w, b) and the gradients of sum(y * r) for x (N, C): the tile runner's values
// against the reference interpreter over the same lazy graph (LAYER_NORM evaluated in f64).
TEST(Runners, TileLayerNormMatchesTheReferenceInterpreter) {
  Mode m("tile");
  const int64_t N = 37, C = 70;
  LayerNormInputs in(N, C, 4);
  Tensor x = in.x, w = in.w, b = in.b, r = in.r;
  Tensor y = F::layer_norm(x, {C}, w, b);
  std::vector<Tensor> g = grad({(y * r).sum()}, {x, w, b});
  std::vector<ir::NodeRef> roots{y.node(), g[0].node(), g[1].node(), g[2].node()};
  std::vector<ref::Array> want = ref::evaluate(roots);
  int64_t launches = stats().tile_launches;
  realize({y, g[0], g[1], g[2]});
  EXPECT_EQ(stats().tile_launches, launches + 2);  // one forward, one backward program
  EXPECT_LE(worst(y.to_vector<double>(), want[0].f), 1e-5);
  EXPECT_LE(worst(g[0].to_vector<double>(), want[1].f), 1e-5);
  EXPECT_LE(worst(g[1].to_vector<double>(), want[2].f), 1e-4);  // sums over rows
  EXPECT_LE(worst(g[2].to_vector<double>(), want[3].f), 1e-4);
}

// The runner's gradients against central differences of sum(layer_norm(x) * r) computed in f64
// (f64 takes the composite: no tile program takes it).
TEST(Runners, TileLayerNormGradientsMatchFiniteDifferences) {
  Mode m("tile");
  const int64_t N = 5, C = 33;
  LayerNormInputs in(N, C, 8);
  Tensor x = in.x, w = in.w, b = in.b, r = in.r;
  std::vector<Tensor> g = grad({(F::layer_norm(x, {C}, w, b) * r).sum()}, {x, w, b});
  std::vector<std::vector<double>> got{g[0].to_vector<double>(), g[1].to_vector<double>(),
                                       g[2].to_vector<double>()};
  std::vector<std::vector<double>> v{x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>()};
  const std::vector<Shape> shapes{{N, C}, {C}, {C}};
  auto f = [&] {
    Tensor xd = tensor(v[0], shapes[0]), wd = tensor(v[1], shapes[1]), bd = tensor(v[2], shapes[2]);
    return (F::layer_norm(xd, {C}, wd, bd) * r.to(DType::F64)).sum().item<double>();
  };
  const double h = 1e-6;
  for (size_t which = 0; which < 3; which++)
    for (size_t i : {size_t{0}, size_t{7}, v[which].size() - 1}) {
      double keep = v[which][i];
      v[which][i] = keep + h;
      double up = f();
      v[which][i] = keep - h;
      double down = f();
      v[which][i] = keep;
      EXPECT_NEAR(got[which][i], (up - down) / (2 * h), 2e-4) << "input " << which << " element " << i;
    }
}

// Second derivatives: the backward's LAYER_NORM nodes are differentiated through their composite.
TEST(Runners, TileLayerNormSecondDerivativesMatchTheGeneratedKernels) {
  auto second = [](const char* mode) {
    Mode m(mode);
    Tensor x = random_tensor({6, 40}, DType::F32, -1, 2, 19),
           w = random_tensor({40}, DType::F32, 0.5, 1.5, 20);
    Tensor b = random_tensor({40}, DType::F32, -1, 1, 21), r = random_tensor({6, 40}, DType::F32, -1, 1, 22);
    x.requires_grad_(), w.requires_grad_();
    Tensor gx = grad({(F::layer_norm(x, {40}, w, b) * r).sum()}, {x})[0];
    std::vector<Tensor> g2 = grad({(gx * gx).sum()}, {x, w});
    return std::make_pair(g2[0].to_vector<double>(), g2[1].to_vector<double>());
  };
  auto tile = second("tile"), generated = second("generated");
  EXPECT_LE(worst(tile.first, generated.first), 1e-3);
  EXPECT_LE(worst(tile.second, generated.second), 1e-3);
}

// On the ref device no runner takes LAYER_NORM nodes: their composite runs, no tile program.
TEST(Runners, RefDeviceTakesTheComposite) {
  Mode m("tile");
  Tensor x = random_tensor({9, 45}, DType::F32, -1, 2, 12), w = random_tensor({45}, DType::F32, 0.5, 1.5, 13);
  Tensor b = random_tensor({45}, DType::F32, -1, 1, 14);
  Tensor want = F::layer_norm(x, {45}, w, b);
  want.realize();
  const Device ref = Device::parse("ref");
  Tensor xr = x.to(ref), wr = w.to(ref), br = b.to(ref);
  xr.requires_grad_(), wr.requires_grad_();
  int64_t launches = stats().tile_launches;
  Tensor y = F::layer_norm(xr, {45}, wr, br);
  std::vector<Tensor> g = grad({y.sum()}, {xr, wr});
  realize({y, g[0], g[1]});
  EXPECT_EQ(stats().tile_launches, launches);
  EXPECT_LE(worst(y.to_vector<double>(), want.to_vector<double>()), 1e-5);
  Mode gen("generated");
  Tensor xg = x.detach(), wg = w.detach();
  xg.requires_grad_(), wg.requires_grad_();
  std::vector<Tensor> gg = grad({F::layer_norm(xg, {45}, wg, b).sum()}, {xg, wg});
  EXPECT_LE(worst(g[0].to_vector<double>(), gg[0].to_vector<double>()), 1e-5);
  EXPECT_LE(worst(g[1].to_vector<double>(), gg[1].to_vector<double>()), 1e-4);
}

// ---- a GPT training step captured by kiln::Jit ----

struct Trained {
  std::vector<float> losses;
  std::vector<double> params;  // every parameter after the steps, flattened
  int64_t tile_launches_per_replay = 0;
  int64_t schedules_in_replays = 0;
};

// 4 SGD steps of a 2-layer GPT on `device`, the step captured by kiln::Jit (recorded at the first
// two calls, replayed at the last two).
Trained train_gpt(const char* layernorm, Device device) {
  Mode m(layernorm);
  struct OnDevice {  // the model's parameters are made on the default device
    Device was = default_device();
    explicit OnDevice(Device d) { set_default_device(d); }
    ~OnDevice() { set_default_device(was); }
  } on(device);
  manual_seed(31);
  nn::GPT model(nn::GPTConfig{.vocab_size = 40,
                              .block_size = 16,
                              .n_layer = 2,
                              .n_head = 2,
                              .n_embd = 48,
                              .dropout = 0,
                              .bias = true});
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss = model(in[0], in[1]).second;
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  });
  Trained t;
  const int64_t B = 2, T = 16;
  for (int s = 0; s < 4; s++) {
    std::vector<int64_t> x, y;
    for (int64_t i = 0; i < B * T; i++) x.push_back((7 * i + s) % 40), y.push_back((7 * i + s + 1) % 40);
    int64_t launches = stats().tile_launches, schedules = stats().schedules;
    t.losses.push_back(step({tensor(x, {B, T}).to(device), tensor(y, {B, T}).to(device)})[0].item<float>());
    if (s >= 2) {
      EXPECT_TRUE(step.captured());
      t.tile_launches_per_replay = stats().tile_launches - launches;
      t.schedules_in_replays += stats().schedules - schedules;
    }
  }
  for (auto& p : model->parameters()) {
    std::vector<double> v = p.to(Device::cpu()).to_vector<double>();
    t.params.insert(t.params.end(), v.begin(), v.end());
  }
  return t;
}

void expect_tile_step_matches(Device device, double tol) {
  Trained tile = train_gpt("tile", device), generated = train_gpt("generated", device);
  // 5 layer norms (2 per block, the final one), each a forward and a backward program per step
  EXPECT_EQ(tile.tile_launches_per_replay, 10);
  EXPECT_EQ(generated.tile_launches_per_replay, 0);
  EXPECT_EQ(tile.schedules_in_replays, 0);  // replays: the captured launches only
  EXPECT_EQ(generated.schedules_in_replays, 0);
  for (size_t s = 0; s < tile.losses.size(); s++)
    EXPECT_NEAR(tile.losses[s], generated.losses[s], tol * std::fabs(generated.losses[s])) << "step " << s;
  EXPECT_LE(worst(tile.params, generated.params), tol);
  EXPECT_LT(tile.losses.back(), tile.losses.front());
}

TEST(Runners, JitGptStepReplaysTheTileLayerNorm) { expect_tile_step_matches(Device::cpu(), 1e-4); }

class TileCudaRunner : public GpuTest {};

TEST_F(TileCudaRunner, JitGptStepReplaysTheTileLayerNormInTheCudaGraph) {
  int64_t graphs = stats().graph_launches;
  expect_tile_step_matches(gpu, 1e-3);
  EXPECT_GT(stats().graph_launches, graphs);  // the replays ran as CUDA graphs
}

TEST_F(TileCudaRunner, LayerNormMatchesTheReferenceInterpreter) {
  Mode m("tile");
  const int64_t N = 300, C = 200;
  Tensor x = random_tensor({N, C}, DType::F32, -1, 2, 15).to(gpu),
         w = random_tensor({C}, DType::F32, 0.5, 1.5, 16).to(gpu);
  Tensor b = random_tensor({C}, DType::F32, -1, 1, 17).to(gpu),
         r = random_tensor({N, C}, DType::F32, -1, 1, 18).to(gpu);
  realize({x, w, b, r});
  x.requires_grad_(), w.requires_grad_();
  Tensor y = F::layer_norm(x, {C}, w, b);
  std::vector<Tensor> g = grad({(y * r).sum()}, {x, w});
  std::vector<ref::Array> want = ref::evaluate({y.node(), g[0].node(), g[1].node()});
  int64_t launches = stats().tile_launches;
  realize({y, g[0], g[1]});
  EXPECT_EQ(stats().tile_launches, launches + 2);
  EXPECT_LE(worst(y.to(Device::cpu()).to_vector<double>(), want[0].f), 1e-5);
  EXPECT_LE(worst(g[0].to(Device::cpu()).to_vector<double>(), want[1].f), 1e-5);
  EXPECT_LE(worst(g[1].to(Device::cpu()).to_vector<double>(), want[2].f), 1e-3);
}

}  // namespace
}  // namespace kiln::testing
