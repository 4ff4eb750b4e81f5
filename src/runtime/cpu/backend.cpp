// The CPU backend (runtime/backend.h): pooled host memory, C programs built by the system compiler
// and loaded with dlopen (runtime/cpu/program_cache.h), run in this process on the thread pool.
#include "runtime/backend.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/cpu/compiler.h"
#include "runtime/cpu/program_cache.h"
#include "runtime/host_backend.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {

// Freed host blocks are kept by size and reused: a fresh large allocation costs a page fault per
// 4 KiB on first touch, often more than the kernel that writes it.
class HostPool {
 public:
  void* get(size_t bytes) {
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, bytes);
    if (!p && release()) p = std::aligned_alloc(64, bytes);  // the kept blocks may make room
    return p;
  }
  void put(void* p, size_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    if (cached_ + bytes > kMaxCached) {
      std::free(p);
      return;
    }
    free_[bytes].push_back(p);
    cached_ += bytes;
  }
  // Frees every kept block; whether there were any.
  bool release() {
    std::lock_guard<std::mutex> l(mu_);
    bool any = cached_ > 0;
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
    return any;
  }

 private:
  static constexpr size_t kMaxCached = size_t{1} << 30;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

size_t rounded(size_t bytes) { return bytes < 64 ? 64 : (bytes + 63) / 64 * 64; }

// Runs fn over [s, e) with the launch's arguments, and after them this thread's scratch when the
// program has one (a packed operand: codegen/opt.h's PACK). The scratch is kept for the thread's
// later kernels and grows to the largest asked for.
void run_chunk(const Launch& l, KernelFn fn, void** args, int64_t s, int64_t e) {
  if (l.scratch_bytes == 0) return fn(args, s, e);
  thread_local std::unique_ptr<void, decltype(&std::free)> scratch{nullptr, &std::free};
  thread_local int64_t scratch_bytes = 0;
  if (scratch_bytes < l.scratch_bytes) {
    scratch.reset(std::aligned_alloc(64, static_cast<size_t>((l.scratch_bytes + 63) / 64 * 64)));
    scratch_bytes = scratch ? l.scratch_bytes : 0;
    if (!scratch)
      throw Error("kernel " + l.name + ": out of host memory allocating " + std::to_string(l.scratch_bytes) +
                  " bytes of scratch");
  }
  std::vector<void*> with(args, args + l.nargs);
  with.push_back(scratch.get());
  fn(with.data(), s, e);
}

class CpuLauncher : public Launcher {
 public:
  void launch(const Launch& l, void** args) override {
    stats().kernels_run++;
    if (l.call) return l.call(args);
    auto fn = reinterpret_cast<KernelFn>(l.program);
    if (l.zero_bytes > 0) std::memset(args[0], 0, static_cast<size_t>(l.zero_bytes));
    // a symbolic outer loop is split over its trip count in this launch, not its largest
    int64_t n = l.outer_extent ? l.outer_extent(args) : l.outer_size;
    if (l.parallel)
      parallel_for(n, [&](int64_t s, int64_t e) { run_chunk(l, fn, args, s, e); });
    else
      run_chunk(l, fn, args, 0, n);
  }
};

// Shared memory one thread block may have on an H100 or H200: what the CPU allows a tile core.
constexpr int64_t kHopperSharedPerBlock = 232448;

class CpuBackend : public HostBackend {
 public:
  CpuBackend() {
    // one "block" is one call of a program on one thread; 16-byte vectors are what every CPU kiln
    // builds for has (SSE2, NEON), the compiler's flags may give wider ones (limits())
    limits_ = {.max_threads_per_block = 1,
               .shared_per_block = 0,
               .warp_size = 1,
               .vector_bytes = 16,
               .cores = num_threads(),
               .l2_bytes = 0,
               .scratch = true,
               .tile_core_bytes = kHopperSharedPerBlock};
  }
  std::string name() const override { return "cpu"; }
  const DeviceLimits& limits() const override {
    // the kernels' vector registers: known once the compiler (KILN_CC) and its checked flags are
    int v = kernel_vector_bytes();
    std::lock_guard<std::mutex> l(limits_mu_);
    if (limits_.vector_bytes != v) limits_.vector_bytes = v;
    return limits_;
  }

  void* allocate(size_t bytes) override {
    void* p = pool_->get(rounded(bytes));
    if (!p) throw Error("Buffer: out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* p, size_t bytes) override { pool_->put(p, rounded(bytes)); }
  void upload(void* dst, const void* host, size_t bytes) override { std::memcpy(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override { std::memcpy(host, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

  codegen::Target target() const override { return codegen::Target::CPU; }
  std::vector<Launch> load(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered) override {
    std::vector<KernelFn> fns = load_programs(kernel_sources(lowered));
    std::vector<Launch> out;
    for (size_t i = 0; i < fns.size(); i++) {
      const codegen::Program& p = lowered[i]->program;
      Launch l = Launch::of(*lowered[i], Device::cpu(), reinterpret_cast<void*>(fns[i]));
      l.parallel = p.outer_size > 1 && !p.serial;  // realize still decides by size
      out.push_back(l);
    }
    return out;
  }

  Launcher& launcher() override { return launcher_; }

 private:
  mutable DeviceLimits limits_;
  mutable std::mutex limits_mu_;
  HostPool* pool_ = new HostPool();  // outlives static destructors that free buffers
  CpuLauncher launcher_;
};

std::unique_ptr<Backend> make_cpu(int index) {
  if (index != 0) throw Error("kiln: no device cpu:" + std::to_string(index) + " (the CPU is device cpu)");
  return std::make_unique<CpuBackend>();
}

}  // namespace

KILN_REGISTER_BACKEND(cpu, Device::Kind::CPU, make_cpu);

}  // namespace kiln::runtime
