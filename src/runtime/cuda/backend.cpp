// The CUDA backend (runtime/backend.h) of one GPU: memory from the caching allocator, kernels
// compiled by NVRTC and loaded by the driver (both loaded at run time, so this builds and registers
// without a GPU), queued on the device's stream; cuBLASLt for large matmuls; flash attention.
#include "runtime/backend.h"

#include "codegen/flash_attention.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/copy.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/launcher.h"
#include "runtime/cuda/program_cache.h"
#include "runtime/cuda/timer_events.h"

namespace kiln::runtime::cuda {

namespace {

CUdeviceptr dev(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class CudaBackend : public Backend {
 public:
  // Creates the device's context: throws a kiln::Error naming the device when it cannot.
  explicit CudaBackend(int ordinal) : ordinal_(ordinal) {
    const Context& c = context(ordinal);
    limits_ = {.max_threads_per_block = c.max_threads_per_block,
               .shared_per_block = c.shared_per_block_optin,
               .warp_size = 32,
               .vector_bytes = 16,  // kiln_v4 of 4-byte values
               .cores = c.info.multiprocessors,
               .l2_bytes = c.l2_bytes,
               .tile_core_bytes = c.shared_per_block_optin};
    mma_16bit_ = c.info.major >= 8;  // mma.sync on 16-bit floats (sm_80 and later)
  }
  std::string name() const override { return Device::cuda(ordinal_).str(); }
  const DeviceLimits& limits() const override { return limits_; }

  void* allocate(size_t bytes) override { return reinterpret_cast<void*>(device_alloc(ordinal_, bytes)); }
  void free(void* p, size_t bytes) override { device_free(ordinal_, dev(p), bytes); }
  void upload(void* dst, const void* host, size_t bytes) override {
    cuda::upload(ordinal_, dev(dst), host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    cuda::download(ordinal_, host, dev(src), bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    copy_device(ordinal_, dev(dst), dev(src), bytes);
  }

  std::optional<MemoryStats> memory_stats() const override {
    AllocatorStats a = allocator_stats(ordinal_);
    return MemoryStats{static_cast<int64_t>(a.in_use), static_cast<int64_t>(a.peak),
                       static_cast<int64_t>(a.cached)};
  }
  void reset_peak_memory() override { reset_peak(ordinal_); }

  codegen::Target target() const override { return codegen::Target::CUDA; }
  std::vector<Launch> load(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered) override {
    std::vector<CUfunction> fns = load_kernels(ordinal_, kernel_sources(lowered));
    std::vector<Launch> out;
    for (size_t i = 0; i < fns.size(); i++)
      out.push_back(Launch::of(*lowered[i], Device::cuda(ordinal_), fns[i]));
    return out;
  }
  void clear_program_cache() override { clear_function_cache(); }

  Launcher& launcher() override { return cuda::launcher(); }
  void synchronize() override { cuda::synchronize(ordinal_); }
  std::unique_ptr<Timer> timer() override { return event_timer(ordinal_); }

  std::string gemm_library() const override { return cublaslt_available() ? "cuBLASLt" : ""; }
  bool supports(const ir::Node& n) const override {
    return n.op == ir::Op::ATTENTION && mma_16bit_ && codegen::flash_attention_fits(n);
  }

 private:
  int ordinal_;
  DeviceLimits limits_;
  bool mma_16bit_ = false;
};

std::unique_ptr<Backend> make_cuda(int ordinal) { return std::make_unique<CudaBackend>(ordinal); }

}  // namespace

KILN_REGISTER_BACKEND(cuda, Device::Kind::CUDA, make_cuda);

}  // namespace kiln::runtime::cuda
