// Shared test helpers: random host-built tensors and comparison against the reference interpreter.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::testing {

// A contiguous tensor of `shape` filled on the host with std::mt19937_64(seed): floats uniform in
// [lo, hi) (f16/bf16 rounded from f32), integers and bools uniform in [lo, hi] (clamped to the
// dtype's range).
Tensor random_tensor(const Shape& shape, DType dtype, double lo, double hi, uint64_t seed);

struct Tol {
  double rtol, atol;
};
// Default tolerances per dtype (f32 as for + - * /; transcendental ops pass transcendental=true).
Tol default_tol(DType t, bool transcendental = false);

// Compares t against kiln::ref::evaluate of its graph (taken before t is realized): shapes equal,
// NaN matches NaN, inf matches inf of the same sign, floats within atol + rtol*|want|, integers and
// bools exactly. Reports the first mismatches as a gtest failure. Returns true when all match.
bool expect_matches_reference(const Tensor& t, double rtol, double atol);
bool expect_matches_reference(const Tensor& t);  // default_tol(t.dtype())
// The opts (KILN_DEBUG=3 names) of every kernel that realizing t would run on the default device,
// each followed by a space.
std::string kernel_opts(const Tensor& t);
std::string cuda_kernel_opts(const Tensor& t);  // the same, lowered for CUDA (needs no GPU)

// KILN_DETERMINISTIC for the scope: results bit-identical on the GPU too (no atomic scatter-adds)
struct Deterministic {
  bool before = settings().deterministic;
  Deterministic() { settings().deterministic = true; }
  ~Deterministic() { settings().deterministic = before; }
};
// The same, for a tensor that may already be realized: `graph` is t.node() taken before realizing.
bool expect_matches_reference(const Tensor& t, const std::shared_ptr<const ir::Node>& graph, double rtol,
                              double atol);

// Gradient check of fn at `inputs` (f64 tensors): loss = sum(fn(inputs) * w) for fixed random w;
// kiln's compiled gradient must match (1) the reference interpreter on the same gradient graph and
// (2) central finite differences of the loss evaluated by the interpreter in float64.
void expect_gradients_match(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                            const std::vector<Tensor>& inputs, uint64_t seed, double rtol = 1e-5,
                            double atol = 1e-6);

// The message of the kiln::Error f throws, or "no error".
std::string error_of(const std::function<void()>& f);

// Runs f on a thread whose stack is `stack_bytes` (as `ulimit -s` would set it) and waits for it;
// an exception f throws is thrown again here. Tests of deep graphs use it to prove that no walk
// recurses once per node.
void run_with_stack(size_t stack_bytes, const std::function<void()>& f);

// Compares the values of t (realizing it) to `want`, with the same rules.
bool expect_values(const Tensor& t, const std::vector<double>& want, double rtol = 0, double atol = 0);

// A fresh, empty KILN_CACHE_DIR (temp dir / name + pid, not created) for one test, with the
// memory cache cleared; the settings are restored and the folder removed when it goes.
struct TempCache {
  Settings saved = settings();
  std::filesystem::path dir;
  explicit TempCache(const std::string& name);
  ~TempCache();
};

// Runs body in a forked child whose address space may grow by at most `extra_bytes` beyond its size
// at the fork (RLIMIT_AS); body's result is the child's exit code (an exception escaping it: 99, with
// its message on stderr). Returns that code, 128 + the signal that ended the child, or -1 when it ran
// past `limit_s` seconds (then it is killed: a hang).
int run_with_memory_limit(size_t extra_bytes, const std::function<int()>& body, int limit_s = 120);
// Builds with a sanitizer: their allocators report an allocation RLIMIT_AS refuses instead of
// failing it, so tests of that skip.
bool sanitized_build();

// The kernels the realize driver launches on this thread while it lives, in order: each one's
// program name (E_/r_ and its loop sizes) and the memory of its first output. It keeps no buffer
// alive (an in-place write must see only the tensors' own references).
struct LaunchLog {
  struct Run {
    std::string name;
    const void* out;
    int64_t loop_elems;  // the product of the loop sizes in the name: the elements it computes
  };
  std::vector<Run> runs;
  LaunchLog();
  ~LaunchLog();
  LaunchLog(const LaunchLog&) = delete;
  LaunchLog& operator=(const LaunchLog&) = delete;

 private:
  struct Observer;
  std::unique_ptr<Observer> observer_;
};

// A fixture for tests that need a GPU: skipped, with the reason, where no CUDA GPU is usable.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "no usable CUDA GPU: " << why;
  }
  const Device gpu = Device::cuda();
};

// Causal self-attention as a GPT block writes it, over a (B, T, 3C) projection: q, k and v are
// strided views of it, scaled scores are masked and softmaxed around the two matmuls. Returns
// (B, T, C).
Tensor gpt_attention(const Tensor& qkv, int64_t heads);

}  // namespace kiln::testing
