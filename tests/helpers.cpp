#include "helpers.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "codegen/passes.h"
#include "engine/interpreter.h"
#include "engine/launch_observer.h"
#include "ir/graph_rewrite.h"
#include "runtime/backend.h"
#include "schedule/schedule.h"

namespace kiln::testing {

namespace {

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

template <class T>
Tensor ints(const Shape& s, DType t, double lo, double hi, std::mt19937_64& g) {
  double tlo, thi;
  if (t == DType::Bool)
    tlo = 0, thi = 1;
  else if (t == DType::U64)
    tlo = 0, thi = 9.0e18;
  else if (t == DType::I64)
    tlo = -9.0e18, thi = 9.0e18;
  else
    tlo = static_cast<double>(std::numeric_limits<T>::min()),
    thi = static_cast<double>(std::numeric_limits<T>::max());
  auto l = static_cast<int64_t>(std::ceil(std::clamp(lo, tlo, thi)));
  auto h = static_cast<int64_t>(std::floor(std::clamp(hi, tlo, thi)));
  if (h < l) h = l;
  std::uniform_int_distribution<int64_t> d(l, h);
  std::vector<T> v(static_cast<size_t>(numel_of(s)));
  for (auto& x : v) x = static_cast<T>(d(g));
  return from_buffer(v.data(), s, t);
}

template <class T, class F>
Tensor floats(const Shape& s, DType t, double lo, double hi, std::mt19937_64& g, F conv) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(numel_of(s)));
  for (auto& x : v) x = conv(d(g));
  return from_buffer(v.data(), s, t);
}

bool same(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (std::isnan(got) || std::isinf(got)) return false;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

Tensor random_tensor(const Shape& shape, DType dtype, double lo, double hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  switch (dtype) {
    case DType::F32:
      return floats<float>(shape, dtype, lo, hi, g, [](double x) { return static_cast<float>(x); });
    case DType::F64: return floats<double>(shape, dtype, lo, hi, g, [](double x) { return x; });
    case DType::F16:
      return floats<uint16_t>(shape, dtype, lo, hi, g,
                              [](double x) { return float_to_half(static_cast<float>(x)); });
    case DType::BF16:
      return floats<uint16_t>(shape, dtype, lo, hi, g,
                              [](double x) { return float_to_bf16(static_cast<float>(x)); });
    case DType::Bool: return ints<uint8_t>(shape, dtype, lo, hi, g);
    case DType::U8: return ints<uint8_t>(shape, dtype, lo, hi, g);
    case DType::I8: return ints<int8_t>(shape, dtype, lo, hi, g);
    case DType::I16: return ints<int16_t>(shape, dtype, lo, hi, g);
    case DType::I32: return ints<int32_t>(shape, dtype, lo, hi, g);
    case DType::I64: return ints<int64_t>(shape, dtype, lo, hi, g);
    case DType::U32: return ints<uint32_t>(shape, dtype, lo, hi, g);
    case DType::U64: return ints<uint64_t>(shape, dtype, lo, hi, g);
  }
  return {};
}

Tol default_tol(DType t, bool transcendental) {
  switch (t) {
    case DType::F64: return {1e-9, 1e-9};
    case DType::F32: return transcendental ? Tol{1e-4, 1e-5} : Tol{2e-5, 1e-5};
    case DType::F16: return {5e-3, 1e-3};
    case DType::BF16: return {3e-2, 1e-2};
    default: return {0, 0};
  }
}

namespace {
bool compare(const Shape& got_shape, DType dtype, const std::vector<double>& got,
             const std::vector<int64_t>& got_i, const Shape& want_shape, const std::vector<double>& want,
             const std::vector<int64_t>& want_i, double rtol, double atol) {
  if (got_shape != want_shape) {
    ADD_FAILURE() << "shape mismatch: got " << shape_str(got_shape) << ", want " << shape_str(want_shape);
    return false;
  }
  bool exact = !is_float(dtype);
  size_t n = exact ? want_i.size() : want.size();
  if ((exact ? got_i.size() : got.size()) != n) {
    ADD_FAILURE() << "element count mismatch: got " << (exact ? got_i.size() : got.size()) << ", want " << n;
    return false;
  }
  std::ostringstream os;
  int bad = 0;
  for (size_t k = 0; k < n; k++) {
    bool ok = exact ? got_i[k] == want_i[k] : same(got[k], want[k], rtol, atol);
    if (ok) continue;
    if (bad < 6)
      os << "  [" << k << "] got " << (exact ? std::to_string(got_i[k]) : fmt(got[k])) << ", want "
         << (exact ? std::to_string(want_i[k]) : fmt(want[k])) << "\n";
    bad++;
  }
  if (bad) {
    ADD_FAILURE() << bad << " of " << n << " elements differ (dtype " << dtype_name(dtype) << ", shape "
                  << shape_str(want_shape) << ", rtol " << rtol << ", atol " << atol << "):\n"
                  << os.str();
    return false;
  }
  return true;
}
}  // namespace

bool expect_matches_reference(const Tensor& t, double rtol, double atol) {
  auto n = t.node();  // the graph, before realize() replaces it with a buffer
  return expect_matches_reference(t, n, rtol, atol);
}

bool expect_matches_reference(const Tensor& t, const std::shared_ptr<const ir::Node>& n, double rtol,
                              double atol) {
  ref::Array want;
  try {
    want = ref::evaluate(n, /*use_realized=*/false);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "reference interpreter threw: " << e.what();
    return false;
  }
  if (t.dtype() != want.dtype) {
    ADD_FAILURE() << "dtype mismatch: tensor " << dtype_name(t.dtype()) << ", reference "
                  << dtype_name(want.dtype);
    return false;
  }
  std::vector<double> got;
  std::vector<int64_t> got_i;
  try {
    if (is_float(t.dtype()))
      got = t.to_vector<double>();
    else
      got_i = t.to_vector<int64_t>();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "realize threw: " << e.what();
    return false;
  }
  return compare(t.shape(), t.dtype(), got, got_i, want.shape, want.f, want.i, rtol, atol);
}

bool expect_matches_reference(const Tensor& t) {
  Tol tol = default_tol(t.dtype());
  return expect_matches_reference(t, tol.rtol, tol.atol);
}

bool expect_values(const Tensor& t, const std::vector<double>& want, double rtol, double atol) {
  std::vector<double> got;
  try {
    got = t.to_vector<double>();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "realize threw: " << e.what();
    return false;
  }
  std::vector<int64_t> gi, wi;
  if (!is_float(t.dtype())) {
    for (double g : got) gi.push_back(static_cast<int64_t>(g));
    for (double w : want) wi.push_back(static_cast<int64_t>(w));
  }
  return compare(t.shape(), t.dtype(), got, gi, t.shape(), want, wi, rtol, atol);
}

void expect_gradients_match(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                            const std::vector<Tensor>& inputs, uint64_t seed, double rtol, double atol) {
  Tensor out = fn(inputs);
  ASSERT_TRUE(is_float(out.dtype())) << "gradient check of a non-float output";
  Tensor w = random_tensor(out.shape(), out.dtype(), -1, 1, seed);
  auto loss_of = [&](const std::vector<Tensor>& xs) { return (fn(xs) * w).sum(); };
  std::vector<Tensor> g = grad({loss_of(inputs)}, inputs);
  std::vector<ref::Array> ref_g;
  for (auto& gi : g) ref_g.push_back(ref::evaluate(gi.node(), false));
  realize(g);
  for (size_t i = 0; i < inputs.size(); i++) {
    SCOPED_TRACE("gradient of input " + std::to_string(i) + " " + shape_str(inputs[i].shape()));
    ASSERT_EQ(g[i].shape(), inputs[i].shape());
    std::vector<double> got = g[i].to_vector<double>();
    std::vector<double> x = inputs[i].to_vector<double>();
    int bad = 0;
    for (size_t k = 0; k < x.size(); k++) {
      // a step small against |x| (functions like log near 0), but not so small that rounding noise
      // in the loss dominates
      double h = 1e-6 * std::max(1.0, std::fabs(x[k]));
      if (x[k] != 0) h = std::min(h, std::fabs(x[k]) * 1e-4);
      auto at = [&](double v) {
        std::vector<double> xk = x;
        xk[k] = v;
        std::vector<Tensor> xs = inputs;
        xs[i] = from_buffer(xk.data(), inputs[i].shape(), DType::F64);
        return ref::evaluate(loss_of(xs).node(), false).at(0);
      };
      double fd = (at(x[k] + h) - at(x[k] - h)) / (2 * h);
      double ref = ref_g[i].at(static_cast<int64_t>(k));
      bool ok_ref = same(got[k], ref, 1e-9, 1e-12);
      bool ok_fd = same(got[k], fd, rtol, atol + 1e-7 * std::fabs(fd));
      if ((!ok_ref || !ok_fd) && bad++ < 5)
        ADD_FAILURE() << "element " << k << ": kiln " << fmt(got[k]) << ", reference " << fmt(ref)
                      << ", finite difference " << fmt(fd);
    }
  }
}

void run_with_stack(size_t stack_bytes, const std::function<void()>& f) {
  struct Call {
    const std::function<void()>* f;
    std::exception_ptr error;
  } call{&f, nullptr};
  auto body = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->f)();
    } catch (...) {
      c->error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t t;
  int rc = pthread_create(&t, &attr, body, &call);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("run_with_stack: pthread_create failed");
  pthread_join(t, nullptr);
  if (call.error) std::rethrow_exception(call.error);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Tensor gpt_attention(const Tensor& qkv, int64_t heads) {
  int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / heads;
  auto head = [&](int64_t j) {
    return qkv.slice(2, j * C, (j + 1) * C).reshape({B, T, heads, D}).transpose(1, 2);
  };
  Tensor i = arange(T, {.device = qkv.device()});
  Tensor att = (head(0).matmul(head(1).transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D))))
                   .masked_fill(i.unsqueeze(1) < i.unsqueeze(0), -INFINITY);
  return att.softmax(-1).matmul(head(2)).transpose(1, 2).reshape({B, T, C});
}

TempCache::TempCache(const std::string& name) {
  dir = std::filesystem::temp_directory_path() / (name + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  settings().cache_dir = dir.string();
  clear_memory_cache();
}

TempCache::~TempCache() {
  settings() = saved;
  clear_memory_cache();
  std::filesystem::remove_all(dir);
}

int run_with_memory_limit(size_t extra_bytes, const std::function<int()>& body, int limit_s) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;  // the address space's size, in pages
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + extra_bytes;
    if (pages == 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(98);
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exception in the memory-limited child: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

bool sanitized_build() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

namespace {
std::string opts_for(const Tensor& t, codegen::Target target, const codegen::DeviceLimits& limits) {
  std::string all;
  for (auto& k : schedule::make_schedule(ir::rewrite_graph({t.node()})).kernels)
    for (auto& o : codegen::lower(k.ast, target, limits).opts) all += o + " ";
  return all;
}
}  // namespace

std::string kernel_opts(const Tensor& t) {
  const runtime::Backend& b = runtime::backend(default_device());
  return opts_for(t, b.target(), b.limits());
}
// the limits every CUDA device has: no GPU needed
std::string cuda_kernel_opts(const Tensor& t) { return opts_for(t, codegen::Target::CUDA, {}); }

struct LaunchLog::Observer : engine::LaunchObserver {
  LaunchLog* log;
  engine::LaunchObserver* prev = engine::launch_observer();
  explicit Observer(LaunchLog* l) : log(l) { engine::launch_observer() = this; }
  ~Observer() override { engine::launch_observer() = prev; }
  void launched(const runtime::Launch& l, const std::vector<std::shared_ptr<Buffer>>& outputs,
                const std::vector<std::shared_ptr<Buffer>>& inputs) override {
    int64_t elems = 1;
    for (size_t at = l.name.find('_'); at != std::string::npos; at = l.name.find('_', at + 1))
      elems *= std::atoll(l.name.c_str() + at + 1);
    log->runs.push_back({l.name, outputs.empty() ? nullptr : outputs[0]->data, elems});
    if (prev) prev->launched(l, outputs, inputs);
  }
  long holds(const Buffer& b) const override { return prev ? prev->holds(b) : 0; }
};

LaunchLog::LaunchLog() : observer_(std::make_unique<Observer>(this)) {}
LaunchLog::~LaunchLog() = default;

}  // namespace kiln::testing
