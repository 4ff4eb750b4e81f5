// The ref backend (runtime/backend.h), in the spirit of tinygrad's PYTHON device: host memory, and
// the lowered linear programs the C renderer would render run by a plain interpreter (program.h),
// the outer loop split over the thread pool as on the CPU. No compiler, deterministic, slow: the
// oracle the C and CUDA renderings are checked against, where a load or store outside its buffer
// is an error.
#include "runtime/backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/host_backend.h"
#include "runtime/ref/program.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {

// Host memory that remembers each block's size, so a launch knows how far each argument reaches.
class Blocks {
 public:
  void* allocate(size_t bytes) {
    size_t rounded = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw Error("Buffer: out of host memory allocating " + std::to_string(bytes) + " bytes on ref");
    std::lock_guard<std::mutex> l(mu_);
    sizes_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void free(void* p) {
    {
      std::lock_guard<std::mutex> l(mu_);
      sizes_.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }
  // Bytes from p to the end of the block it lies in; 0 outside every block.
  size_t reach(const void* p) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> l(mu_);
    auto it = sizes_.upper_bound(a);
    if (it == sizes_.begin()) return 0;
    --it;
    return a < it->first + it->second ? it->first + it->second - a : 0;
  }

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> sizes_;
};

class RefLauncher : public Launcher {
 public:
  explicit RefLauncher(const Blocks& blocks) : blocks_(blocks) {}
  void launch(const Launch& l, void** args) override {
    const auto& d = *static_cast<const ref_device::Decoded*>(l.program);
    std::vector<int64_t> elems(d.globals.size());
    for (size_t k = 0; k < elems.size(); k++)
      elems[k] = static_cast<int64_t>(blocks_.reach(args[k]) / static_cast<size_t>(dtype_size(d.globals[k])));
    if (l.zero_bytes > 0) {
      if (static_cast<int64_t>(blocks_.reach(args[0])) < l.zero_bytes)
        throw Error("kiln.ref: kernel " + d.name + " zeroes " + std::to_string(l.zero_bytes) +
                    " bytes of argument 0, which holds fewer");
      std::memset(args[0], 0, static_cast<size_t>(l.zero_bytes));
    }
    // the outer loop's steps write apart (as on the CPU): split over the thread pool, or in order
    if (l.parallel)
      parallel_for(l.outer_size,
                   [&](int64_t s, int64_t e) { ref_device::execute(d, args, elems.data(), s, e); });
    else
      ref_device::execute(d, args, elems.data(), 0, l.outer_size);
    stats().kernels_run++;
  }

 private:
  const Blocks& blocks_;
};

class RefBackend : public HostBackend {
 public:
  // the CPU's lowering (Target::CPU, one thread per "block"): the programs the C renderer renders
  RefBackend()
      : limits_{.max_threads_per_block = 1,
                .shared_per_block = 0,
                .warp_size = 1,
                .vector_bytes = 16,
                .cores = num_threads(),
                .l2_bytes = 0} {}
  std::string name() const override { return "ref"; }
  const DeviceLimits& limits() const override { return limits_; }

  void* allocate(size_t bytes) override { return blocks_->allocate(bytes); }
  void free(void* p, size_t) override { blocks_->free(p); }
  void upload(void* dst, const void* host, size_t bytes) override { std::memcpy(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override { std::memcpy(host, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }

  codegen::Target target() const override { return codegen::Target::CPU; }

  // Each program is decoded once, keyed by its C rendering (which says all it computes).
  std::vector<Launch> load(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered) override {
    std::vector<Launch> out;
    int decoded = 0;
    for (const auto& low : lowered) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = programs_.find(low->source);
      if (it == programs_.end()) {
        kept_.push_back(std::make_unique<const ref_device::Decoded>(ref_device::decode(low->program)));
        it = programs_.emplace(low->source, kept_.back().get()).first;
        stats().kernels_compiled++;
        decoded++;
      } else {
        stats().memory_cache_hits++;
      }
      Launch launch =
          Launch::of(*low, Device{Device::Kind::REF, 0}, const_cast<ref_device::Decoded*>(it->second));
      launch.parallel = low->program.outer_size > 1 && !low->program.serial;  // realize still decides by size
      out.push_back(launch);
    }
    if (settings().debug >= 1 && decoded > 0)
      std::fprintf(stderr, "kiln: device ref: %d of %zu programs decoded for the interpreter\n", decoded,
                   lowered.size());
    return out;
  }
  // Launches handed out may still run: the programs stay, only the lookup forgets them.
  void clear_program_cache() override {
    std::lock_guard<std::mutex> l(mu_);
    programs_.clear();
  }

  Launcher& launcher() override { return launcher_; }

 private:
  DeviceLimits limits_;
  Blocks* blocks_ = new Blocks();  // outlives static destructors that free buffers
  RefLauncher launcher_{*blocks_};
  std::mutex mu_;
  std::unordered_map<std::string, const ref_device::Decoded*> programs_;
  std::vector<std::unique_ptr<const ref_device::Decoded>> kept_;
};

std::unique_ptr<Backend> make_ref(int index) {
  if (index != 0)
    throw Error("kiln: no device ref:" + std::to_string(index) +
                " (the reference interpreter is device ref)");
  return std::make_unique<RefBackend>();
}

}  // namespace

KILN_REGISTER_BACKEND(ref, Device::Kind::REF, make_ref);

}  // namespace kiln::runtime
