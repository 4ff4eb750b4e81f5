// The CPU launcher and the replay of a launch list (see launcher.h).
#include "runtime/launcher.h"

#include <cstdio>

#include "kiln/debug.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/program_cache.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

void Launcher::replay(const std::vector<SlotLaunch>& list, const std::vector<void*>& slots) {
  std::vector<void*> args;
  for (const SlotLaunch& s : list) {
    args.clear();
    for (int32_t a : s.args) args.push_back(slots[static_cast<size_t>(a)]);
    launch(s.launch, args.data());
  }
}

namespace {
class CpuLauncher : public Launcher {
 public:
  void launch(const Launch& l, void** args) override {
    KernelFn fn = l.fn;
    if (l.parallel)
      parallel_for(l.outer_size, [&](int64_t s, int64_t e) { fn(args, s, e); });
    else
      fn(args, 0, l.outer_size);
    stats().kernels_run++;
  }
};
}  // namespace

Launcher& cpu_launcher() {
  static CpuLauncher l;
  return l;
}

namespace {
class CudaLauncher : public Launcher {
 public:
  void launch(const Launch& l, void** args) override {
    stats().kernels_run++;
    if (l.gemm) {
      const schedule::MatchedMatmul& m = *l.gemm;
      cuda::GemmDesc desc = m.desc;
      desc.allow_tf32 = l.tf32;
      auto at = [&](int input, int64_t bytes) {
        return reinterpret_cast<cuda::CUdeviceptr>(args[l.nouts + static_cast<size_t>(input)]) +
               static_cast<cuda::CUdeviceptr>(bytes);
      };
      if (cuda::gemm(l.device.index, desc, at(m.a_input, l.a_bytes), at(m.b_input, l.b_bytes),
                     reinterpret_cast<cuda::CUdeviceptr>(args[0]),
                     m.bias_input >= 0 ? at(m.bias_input, l.bias_bytes) : 0))
        return;
      if (settings().debug >= 3) {
        std::string why = cuda::gemm_unsupported(desc);
        std::fprintf(stderr, "kiln: cuBLASLt declined %s (%s); running the generated kernel\n",
                     l.name.c_str(), why.empty() ? "no algorithm for these operands" : why.c_str());
      }
    }
    cuda::launch(l.device.index, l.cuda_fn, l.cuda, std::vector<void*>(args, args + l.nargs));
  }
};
}  // namespace

Launcher& cuda_launcher() {
  static CudaLauncher l;
  return l;
}

Launcher& launcher(Device d) { return d.is_cuda() ? cuda_launcher() : cpu_launcher(); }

LaunchObserver*& launch_observer() {
  thread_local LaunchObserver* o = nullptr;
  return o;
}

}  // namespace kiln::runtime
