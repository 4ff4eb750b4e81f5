// kiln::io checkpoints: round trip of model, optimizer, step, extra strings and RNG state; a training
// run resumed from a checkpoint matches the uninterrupted run bit for bit.
#include "helpers.h"
#include "io/io_test_util.h"

namespace kiln {
namespace {

using io_test::error_of;
using io_test::tensor_bytes;

class CheckpointIO : public io_test::TempDirTest {};

TEST_F(CheckpointIO, RoundTrip) {
  io::Checkpoint c;
  c.model = {{"fc.weight", testing::random_tensor({4, 3}, DType::F32, -1, 1, 1)},
             {"fc.bias", testing::random_tensor({4}, DType::BF16, -1, 1, 2)}};
  c.optimizer = {{"fc.weight.exp_avg", testing::random_tensor({4, 3}, DType::F32, -1, 1, 3)},
                 {"step", full({}, int64_t{12}, DType::I64)}};
  c.step = -5;  // any int64
  c.rng_seed = 0xFFFFFFFFFFFFFFFFull;
  c.rng_offset = 1234567890123ull;
  c.extra = {{"lr", "0.001"}, {"note", "ünicode"}};
  std::string p = path("ckpt.safetensors");
  io::save_checkpoint(p, c);
  io::Checkpoint d = io::load_checkpoint(p);
  EXPECT_EQ(d.step, -5);
  EXPECT_EQ(d.rng_seed, c.rng_seed);
  EXPECT_EQ(d.rng_offset, c.rng_offset);
  EXPECT_EQ(d.extra, c.extra);
  ASSERT_EQ(d.model.size(), 2u);
  ASSERT_EQ(d.optimizer.size(), 2u);
  for (auto& [k, t] : c.model) EXPECT_EQ(tensor_bytes(d.model.at(k)), tensor_bytes(t)) << k;
  for (auto& [k, t] : c.optimizer) EXPECT_EQ(tensor_bytes(d.optimizer.at(k)), tensor_bytes(t)) << k;
  // it is a plain safetensors file
  io::SafetensorsFile f = io::load_safetensors(p);
  EXPECT_TRUE(f.tensors.count("model.fc.weight") && f.tensors.count("optim.step"));
  EXPECT_EQ(f.metadata.at("kiln.step"), "-5");
}

TEST_F(CheckpointIO, RejectsOtherFiles) {
  std::string p = path("x.safetensors");
  io::save_safetensors(p, {{"model.w", ones({2})}});
  EXPECT_NE(error_of([&] { io::load_checkpoint(p); }).find("not a kiln checkpoint"), std::string::npos);
  io::save_safetensors(
      p, {{"w", ones({2})}},
      {{"kiln.checkpoint", "1"}, {"kiln.step", "1"}, {"kiln.rng_seed", "1"}, {"kiln.rng_offset", "0"}});
  EXPECT_NE(error_of([&] { io::load_checkpoint(p); }).find("tensor 'w' is neither"), std::string::npos);
  io::save_safetensors(p, {}, {{"kiln.checkpoint", "1"}, {"kiln.step", "1x"}, {"kiln.rng_seed", "1"}});
  EXPECT_NE(error_of([&] { io::load_checkpoint(p); }).find("\"kiln.step\" is not an integer: '1x'"),
            std::string::npos);
  io::save_safetensors(p, {}, {{"kiln.checkpoint", "1"}, {"kiln.step", "1"}, {"kiln.rng_seed", "1"}});
  EXPECT_NE(error_of([&] { io::load_checkpoint(p); }).find("lacks \"kiln.rng_offset\""), std::string::npos);
  io::save_safetensors(p, {}, {{"kiln.checkpoint", "2"}});
  EXPECT_NE(error_of([&] { io::load_checkpoint(p); }).find("unsupported checkpoint version '2'"),
            std::string::npos);
}

TEST_F(CheckpointIO, RngStateRoundTrips) {
  manual_seed(42);
  (void)rand({7}).to_vector<float>();
  (void)randn({3, 3}).to_vector<float>();
  io::Checkpoint c;
  io::capture_rng(c);
  EXPECT_EQ(c.rng_seed, 42u);
  EXPECT_EQ(c.rng_offset, 16u);
  std::string p = path("rng.safetensors");
  io::save_checkpoint(p, c);
  std::vector<float> want = rand({5}).to_vector<float>();
  std::vector<int64_t> want_int = randint(0, 1000, {4}).to_vector<int64_t>();

  manual_seed(7);  // some other run in between
  (void)rand({100}).to_vector<float>();
  io::restore_rng(io::load_checkpoint(p));
  EXPECT_EQ(rand({5}).to_vector<float>(), want);
  EXPECT_EQ(randint(0, 1000, {4}).to_vector<int64_t>(), want_int);

  // a generator of one's own
  Generator g(99);
  (void)rand({3}, g);
  io::capture_rng(c, g);
  std::vector<float> want_g = randn({4}, g).to_vector<float>();
  Generator h(1);
  io::restore_rng(c, h);
  EXPECT_EQ(h.seed(), 99u);
  EXPECT_EQ(h.offset(), 3u);
  EXPECT_EQ(randn({4}, h).to_vector<float>(), want_g);
}

// SGD with momentum on a linear model, with dropout-like noise from the global RNG each step.
struct TrainRun {
  Tensor w, v;  // weight (leaf) and momentum buffer
  int64_t step = 0;
  void init() {
    w = testing::random_tensor({4, 2}, DType::F32, -1, 1, 11);
    w.requires_grad_();
    v = zeros({4, 2});
  }
  void train(int steps) {
    Tensor x = testing::random_tensor({8, 4}, DType::F32, -1, 1, 12);
    Tensor y = testing::random_tensor({8, 2}, DType::F32, -1, 1, 13);
    for (int s = 0; s < steps; s++, step++) {
      Tensor mask = (rand({8, 4}) > 0.2f).to(DType::F32);
      w.zero_grad();
      Tensor loss = ((x * mask).matmul(w) - y).square().mean();
      loss.backward();
      Tensor g = w.grad().detach();
      v.assign_(v * 0.9f + g);
      w.assign_(w - v * 0.1f);
      realize({w, v});
    }
  }
};

TEST_F(CheckpointIO, ResumedTrainingMatchesUninterruptedRun) {
  manual_seed(2024);
  TrainRun full_run;
  full_run.init();
  full_run.train(6);

  manual_seed(2024);
  TrainRun first;
  first.init();
  first.train(3);
  io::Checkpoint c;
  c.model = {{"w", first.w}};
  c.optimizer = {{"v", first.v}};
  c.step = first.step;
  io::capture_rng(c);
  std::string p = path("train.safetensors");
  io::save_checkpoint(p, c);

  manual_seed(1);  // the process is gone: other seeds, fresh tensors
  (void)rand({10}).to_vector<float>();
  TrainRun resumed;
  resumed.init();
  io::Checkpoint d = io::load_checkpoint(p);
  resumed.w.assign_(d.model.at("w"));  // w stays the same leaf
  resumed.v.assign_(d.optimizer.at("v"));
  realize({resumed.w, resumed.v});
  resumed.step = d.step;
  io::restore_rng(d);
  resumed.train(3);

  EXPECT_EQ(resumed.step, 6);
  EXPECT_EQ(tensor_bytes(resumed.w), tensor_bytes(full_run.w));
  EXPECT_EQ(tensor_bytes(resumed.v), tensor_bytes(full_run.v));
  EXPECT_NE(tensor_bytes(resumed.w), tensor_bytes(first.w));
}

}  // namespace
}  // namespace kiln
