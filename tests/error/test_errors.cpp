// Misuse must fail with a kiln::Error naming the op, shapes and dtypes, never crash.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace kiln;

namespace {
// Runs f, expecting a kiln::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

// Restores a setting when the test ends.
struct SettingsGuard {
  Settings saved = settings();
  ~SettingsGuard() { settings() = saved; }
};
}  // namespace

TEST(Errors, BroadcastMismatch) {
  expect_error([] { (ones({3}) + ones({4})).realize(); }, {"add", "(3,)", "(4,)"});
  expect_error([] { where(ones({2, 3}) > 0.0, ones({2, 3}), ones({4})); }, {"where", "(4,)"});
}

TEST(Errors, ReshapeToOtherSize) {
  expect_error([] { ones({2, 3}).reshape({4, 2}); }, {"reshape", "(4, 2)", "(2, 3)"});
  expect_error([] { ones({2, 3}).reshape({-1, 4}); }, {"reshape", "(-1, 4)"});
  expect_error([] { ones({2, 3}).reshape({-1, -1}); }, {"reshape", "-1"});
}

TEST(Errors, BadPermutationAndDims) {
  expect_error([] { ones({2, 3}).permute({0, 0}); }, {"permute", "repeats"});
  expect_error([] { ones({2, 3}).permute({0}); }, {"permute", "(2, 3)"});
  expect_error([] { ones({2, 3}).sum(2); }, {"sum", "dim 2", "2 dims"});
  expect_error([] { ones({2, 3}).transpose(0, -3); }, {"transpose", "-3"});
  expect_error([] { ones({2, 3}).expand({4, 3}); }, {"expand", "(2, 3)", "(4, 3)"});
  expect_error([] { ones({2}).matmul(ones({3})); }, {"dot", "(2,)", "(3,)"});
  expect_error([] { ones({2, 3}).matmul(ones({4, 5})); }, {"matmul", "(2, 3)", "(4, 5)"});
  expect_error([] { F::linear(ones({2, 3}), ones({4, 5})); }, {"linear", "(2, 3)", "(4, 5)"});
  expect_error([] { F::linear(ones({2, 3}), ones({4, 3}), ones({3})); }, {"linear", "bias", "(4,)", "(3,)"});
  expect_error([] { ones({2, 3}).index({int64_t{5}}); }, {"index", "5", "size 2"});
  expect_error([] { ones({2, 3}).item<float>(); }, {"item", "(2, 3)"});
}

TEST(Errors, UnsupportedDtypes) {
  expect_error([] { ~ones({2}); }, {"bitwise_not", "f32"});
  expect_error([] { ones({2}, {.dtype = DType::Bool}).neg(); }, {"neg", "bool"});
  expect_error([] { rand({2}, {.dtype = DType::I32}); }, {"rand", "i32"});
  expect_error([] { tensor(std::vector<float>{1, 2, 3}, {2, 2}); }, {"tensor", "3 values", "(2, 2)"});
}

TEST(Errors, ShapesWithMoreElementsThanInt64CanCount) {
  const int64_t big = int64_t{1} << 32;
  const std::string shape = "(4294967296, 4294967296)";
  expect_error([&] { zeros({big, big}); }, {"kiln.zeros:", shape, "int64"});
  expect_error([&] { full({big, big}, 1.0); }, {"kiln.full:", shape, "int64"});
  expect_error([&] { rand({big, big}); }, {"kiln.rand:", shape, "int64"});
  expect_error([&] { ones({1, 1}).expand({big, big}); }, {"kiln.expand:", shape, "int64"});
  expect_error([&] { ones({1}).reshape({big, big, 0}); }, {"kiln.reshape:", "int64"});
  expect_error([&] { tensor(std::vector<float>{1}, {big, big}); }, {"kiln.tensor:", shape, "int64"});
  expect_error([&] { from_buffer(nullptr, {big, big}, DType::F32); }, {"kiln.tensor:", shape, "int64"});
  expect_error(
      [&] {
        data::HostTensor{DType::F32, {big, big}, {}}.to_tensor();
      },
      {"data::HostTensor", shape, "int64"});
}

TEST(Errors, NoCompilerFound) {
  SettingsGuard g;
  settings().cc = "/nonexistent/kiln-cc";
  expect_error([] { (ones({5}) * 123.25f).realize(); }, {"KILN_CC", "/nonexistent/kiln-cc"});
}

TEST(Errors, KernelFailsToCompile) {
  SettingsGuard g;
  auto dir = std::filesystem::temp_directory_path() / ("kiln_badcc_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string cc = (dir / "cc").string();
  {
    std::ofstream f(cc);
    f << "#!/bin/sh\necho 'kernel.c:1: error: the compiler says no' >&2\nexit 1\n";
  }
  std::filesystem::permissions(cc, std::filesystem::perms::owner_all);
  settings().cc = cc;
  settings().cache_dir = (dir / "cache").string();
  clear_memory_cache();
  expect_error([] { (ones({7, 3}) * 321.5f).sum(1).realize(); }, {"the compiler says no", "r_7_3"});
  clear_memory_cache();
  std::filesystem::remove_all(dir);
}

TEST(Errors, OutOfRangeIndicesAreMaskedAndReportedUnderValidate) {
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor idx = tensor(std::vector<int64_t>{0, 5, -1, 1}, {2, 2});
  // never out of bounds: an out-of-range index selects nothing
  EXPECT_EQ(x.gather(1, idx).to_vector<float>(), (std::vector<float>{1, 0, 0, 4}));
  Settings saved = settings();
  settings().validate = true;
  expect_error([&] { x.gather(1, idx).realize(); },
               {"gather", "index 5", "out of range", "size 2", "KILN_VALIDATE"});
  expect_error([&] { x.index_select(0, tensor(std::vector<int64_t>{3})).realize(); }, {"index 3", "size 2"});
  expect_error([&] { x.scatter_add(0, idx, x).realize(); }, {"scatter_add", "index 5"});
  expect_error([&] { one_hot(tensor(std::vector<int64_t>{4}), 3); }, {"one_hot", "index 4"});
  settings() = saved;
}

// Token ids and class targets out of range are errors naming the op (checked on the device, raised
// by the realize that computes the result), also in a step kiln::Jit replays
TEST(Errors, OutOfRangeTokenIdsAndTargetsAreErrors) {
  Tensor w = ones({10, 4});
  expect_error(
      [&] {
        F::embedding(tensor(std::vector<int64_t>{0, 10}), w).realize();
      },
      {"embedding: an index is out of range", "[0, 10)", "(10, 4)"});
  expect_error([&] { F::embedding(tensor(std::vector<int64_t>{-1}), w).realize(); }, {"embedding"});
  EXPECT_EQ(F::embedding(tensor(std::vector<int64_t>{9, 0}), w).sum().item<float>(), 8.0f);
  Tensor logits = zeros({3, 5});
  expect_error(
      [&] {
        F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 5, 1})).realize();
      },
      {"cross_entropy: a target class is out of range", "[0, 5)"});
  // all targets out of range gave NaN
  expect_error(
      [&] {
        F::cross_entropy(logits, tensor(std::vector<int64_t>{7, 8, 9})).item<float>();
      },
      {"cross_entropy"});
  // ignore_index is not out of range
  EXPECT_NEAR(F::cross_entropy(logits, tensor(std::vector<int64_t>{-100, 2, 1})).item<float>(), std::log(5.0),
              1e-6);
  expect_error([] { multinomial(zeros({2, 3}), 1).realize(); }, {"multinomial: probabilities"});
  expect_error([] { multinomial(tensor({0.5f, -0.5f, 1.f}, {3}), 1, true).realize(); }, {"multinomial"});

  Tensor table = ones({6, 2});
  Jit step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{F::embedding(in[0], table).sum()}; });
  for (int i = 0; i < 4; i++) EXPECT_EQ(step({tensor(std::vector<int64_t>{1, 5})})[0].item<float>(), 4.0f);
  EXPECT_TRUE(step.captured());
  expect_error([&] { step({tensor(std::vector<int64_t>{1, 6})}); }, {"embedding: an index is out of range"});
}

// More bytes than memory can address (2^62 f32 elements: 2^64 bytes) is an error, not an
// allocation of the wrapped-around size
TEST(Errors, BuffersLargerThanMemoryCanAddressAreErrors) {
  expect_error([] { (zeros({int64_t{1} << 62}) + 1).realize(); },
               {"elements of f32", "more bytes than memory"});
}
