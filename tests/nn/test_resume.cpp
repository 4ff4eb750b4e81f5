// Checkpoint resume: a tiny GPT trained 3 steps with AdamW, saved (model, optimizer, step, kiln RNG
// and the host data RNG), loaded into a fresh model and optimizer and trained 3 more steps gives the
// same losses, bit for bit, as 6 uninterrupted steps; the same with the step captured by kiln::Jit
// (replays advance the optimizer's step counts as eager steps do).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"

using namespace kiln;

namespace {

nn::GPTConfig resume_config() {
  // dropout > 0: training draws from the global generator, so its state must be restored too
  return {.vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1};
}

struct Trainer {
  nn::GPT model{resume_config()};
  optim::AdamW opt{model->parameters(), {.lr = 1e-2, .weight_decay = 0.1}};
  std::mt19937 data_rng{42};

  float step() {
    std::uniform_int_distribution<int64_t> tok(0, 12);
    std::vector<int64_t> x, y;
    for (int i = 0; i < 4 * 8; i++)
      x.push_back(tok(data_rng)), y.push_back((x.back() + 1) % 13);  // learnable
    auto [logits, loss] = model->forward(tensor(x, {4, 8}), tensor(y, {4, 8}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
};

nn::GPTConfig no_dropout() {  // dropout's seed is made on the host per call: not capturable
  nn::GPTConfig c = resume_config();
  c.dropout = 0;
  return c;
}

// The same training step captured once and replayed.
struct JitTrainer {
  nn::GPT model{no_dropout()};
  optim::AdamW opt{model->parameters(), {.lr = 1e-2, .weight_decay = 0.1}};
  std::mt19937 data_rng{42};
  Jit jit{[this](const std::vector<Tensor>& in) {
    auto [logits, loss] = model->forward(in[0], in[1]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  }};

  float step() {
    std::uniform_int_distribution<int64_t> tok(0, 12);
    std::vector<int64_t> x, y;
    for (int i = 0; i < 4 * 8; i++) x.push_back(tok(data_rng)), y.push_back((x.back() + 1) % 13);
    return jit({tensor(x, {4, 8}), tensor(y, {4, 8})})[0].item<float>();
  }
};

}  // namespace

TEST(Resume, CheckpointContinuesBitIdentically) {
  kiln::testing::Deterministic deterministic;
  manual_seed(7);
  std::vector<float> straight;
  {
    Trainer r;
    for (int i = 0; i < 6; i++) straight.push_back(r.step());
  }

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_test_resume_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  manual_seed(7);
  std::vector<float> resumed;
  {
    Trainer r;
    for (int i = 0; i < 3; i++) resumed.push_back(r.step());
    io::Checkpoint ck;
    ck.model = r.model->state_dict();
    ck.optimizer = r.opt.state_dict();
    ck.step = 3;
    io::capture_rng(ck);
    std::ostringstream rng_state;
    rng_state << r.data_rng;
    ck.extra["data_rng"] = rng_state.str();
    io::save_checkpoint(path, ck);
  }
  manual_seed(12345);  // the restore must undo this
  {
    Trainer r;
    r.data_rng.seed(999);
    io::Checkpoint ck = io::load_checkpoint(path);
    EXPECT_EQ(ck.step, 3);
    r.model->load_state_dict(ck.model);
    r.opt.load_state_dict(ck.optimizer);
    io::restore_rng(ck);
    std::istringstream(ck.extra.at("data_rng")) >> r.data_rng;
    for (int i = 0; i < 3; i++) resumed.push_back(r.step());
  }
  std::filesystem::remove(path);

  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); i++)
    EXPECT_EQ(resumed[i], straight[i]) << "step " << i + 1;  // exact: the same floats
  EXPECT_LT(straight[5], straight[0]);
}

TEST(Resume, JitCapturedStepAdvancesTheOptimizerStepCount) {
  manual_seed(3);
  JitTrainer r;
  for (int i = 0; i < 10; i++) r.step();
  EXPECT_TRUE(r.jit.captured());
  auto sd = r.opt.state_dict();
  EXPECT_EQ(sd.at("step").item<int64_t>(), 10);
  EXPECT_EQ(sd.at("state.0.step").item<int64_t>(), 10);
  EXPECT_EQ(r.opt.step_count(0), 10);
}

// 4 jitted steps, a checkpoint, 4 more jitted steps in a fresh process-like setup: the same losses
// and parameters, bit for bit, as 8 uninterrupted jitted steps.
TEST(Resume, JitCheckpointContinuesBitIdentically) {
  kiln::testing::Deterministic deterministic;
  manual_seed(7);
  std::vector<float> straight;
  std::vector<std::vector<float>> straight_params;
  {
    JitTrainer r;
    for (int i = 0; i < 8; i++) straight.push_back(r.step());
    for (auto& p : r.model->parameters()) straight_params.push_back(p.to_vector<float>());
  }
  manual_seed(7);
  std::vector<float> resumed;
  io::Checkpoint ck;
  {
    JitTrainer r;
    for (int i = 0; i < 4; i++) resumed.push_back(r.step());
    ck.model = r.model->state_dict();
    ck.optimizer = r.opt.state_dict();
    io::capture_rng(ck);
    std::ostringstream rng_state;
    rng_state << r.data_rng;
    ck.extra["data_rng"] = rng_state.str();
  }
  manual_seed(12345);
  {
    JitTrainer r;
    r.model->load_state_dict(ck.model);
    r.opt.load_state_dict(ck.optimizer);
    EXPECT_EQ(r.opt.step_count(0), 4);
    io::restore_rng(ck);
    std::istringstream(ck.extra.at("data_rng")) >> r.data_rng;
    for (int i = 0; i < 4; i++) resumed.push_back(r.step());
    auto params = r.model->parameters();
    ASSERT_EQ(params.size(), straight_params.size());
    for (size_t i = 0; i < params.size(); i++)
      EXPECT_EQ(params[i].to_vector<float>(), straight_params[i]) << "parameter " << i;
  }
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); i++) EXPECT_EQ(resumed[i], straight[i]) << "step " << i + 1;
}
