// The CUDA launcher (see runtime/launcher.h): kernels and cuBLASLt matmuls queued on the device's
// stream. A replayed launch list (kiln::Jit) runs as a CUDA graph (runtime/cuda/graph.h), one per
// set of slot pointers, unless KILN_CUDA_GRAPH=0 or the list cannot be captured.
#include "runtime/cuda/launcher.h"

#include <algorithm>
#include <cstdio>

#include "kiln/debug.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/copy.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/program_cache.h"

namespace kiln::runtime {

namespace {

// Queues one launch on the stream. `scratch` serves a launch whose blocks share outputs (0: memory
// of the allocator's for this launch alone).
void queue(const Launch& l, void** args, cuda::CUdeviceptr scratch) {
  if (l.call) return l.call(args);  // a runner's kernel (a tile program), queued on this stream
  if (l.zero_bytes > 0)
    cuda::zero_device(l.device.index, reinterpret_cast<cuda::CUdeviceptr>(args[0]),
                      static_cast<size_t>(l.zero_bytes));
  if (l.gemm) {
    const schedule::MatchedMatmul& m = *l.gemm;
    cuda::GemmDesc desc = m.desc;
    desc.allow_tf32 = l.tf32;
    auto at = [&](int input, int64_t bytes) {
      return reinterpret_cast<cuda::CUdeviceptr>(args[l.nouts + static_cast<size_t>(input)]) +
             static_cast<cuda::CUdeviceptr>(bytes);
    };
    auto output = [&](int i) { return reinterpret_cast<cuda::CUdeviceptr>(args[static_cast<size_t>(i)]); };
    // the aux matrix: an output the epilogue writes (a gelu's pre-activation) or an input it reads
    cuda::CUdeviceptr aux = m.aux_output >= 0  ? output(m.aux_output)
                            : m.aux_input >= 0 ? at(m.aux_input, l.aux_bytes)
                                               : 0;
    if (cuda::gemm(l.device.index, desc, at(m.a_input, l.a_bytes), at(m.b_input, l.b_bytes),
                   output(m.c_output), m.bias_input >= 0 ? at(m.bias_input, l.bias_bytes) : 0, aux))
      return;
    if (settings().debug >= 3) {
      std::string why = cuda::gemm_unsupported(desc);
      std::fprintf(stderr, "kiln: cuBLASLt declined %s (%s); running the generated kernel\n", l.name.c_str(),
                   why.empty() ? "no algorithm for these operands" : why.c_str());
    }
  }
  cuda::launch(l.device.index, static_cast<cuda::CUfunction>(l.program), l.cuda,
               std::vector<void*>(args, args + l.nargs), scratch);
}

// The graphs of one replayed list and the scratch memory of its launches whose blocks share outputs:
// a graph holds the scratch address, so the memory is the list's own, one block for all (the
// launches run one after another).
struct Graphs : ReplayState {
  int ordinal;
  cuda::GraphCache cache;
  size_t scratch_bytes = 0;
  cuda::CUdeviceptr scratch = 0;
  bool off = false;  // the list cannot be captured: its replays launch each kernel

  Graphs(int ordinal, const std::vector<SlotLaunch>& list) : ordinal(ordinal), cache(ordinal) {
    for (const SlotLaunch& s : list)
      if (s.launch.cuda.split > 1)
        scratch_bytes = std::max(scratch_bytes, static_cast<size_t>(s.launch.cuda.scratch_bytes));
    if (scratch_bytes) scratch = cuda::device_alloc(ordinal, scratch_bytes);
  }
  ~Graphs() override { cuda::device_free(ordinal, scratch, scratch_bytes); }
};

class CudaLauncher : public Launcher {
 public:
  bool replay_keeps_addresses() const override { return settings().cuda_graph; }

  void launch(const Launch& l, void** args) override {
    stats().kernels_run++;
    queue(l, args, 0);
  }

  void replay(const std::vector<SlotLaunch>& list, const std::vector<void*>& slots,
              std::unique_ptr<ReplayState>& state) override {
    if (!settings().cuda_graph || list.empty()) return Launcher::replay(list, slots, state);
    if (!state) state = std::make_unique<Graphs>(list.front().launch.device.index, list);
    auto& g = static_cast<Graphs&>(*state);
    if (!g.off) {
      std::vector<void*> args;
      auto issue = [&] {
        for (const SlotLaunch& s : list) {
          args.clear();
          for (int32_t a : s.args) args.push_back(slots[static_cast<size_t>(a)]);
          queue(s.launch, args.data(), g.scratch);
        }
      };
      // a graph holds each GEMM's descriptor: launches bound per replay (Launch::rebind) key it too
      std::vector<void*> key = slots;
      for (const SlotLaunch& s : list)
        if (s.launch.rebind) key.push_back(const_cast<schedule::MatchedMatmul*>(s.launch.gemm.get()));
      std::string why;
      if (g.cache.run(key, issue, why)) {
        stats().kernels_run += static_cast<int64_t>(list.size());
        return;
      }
      g.off = true;
      if (settings().debug >= 1)
        std::fprintf(stderr,
                     "kiln: a jit step of %zu launches cannot run as a CUDA graph (%s); its replays launch "
                     "each kernel\n",
                     list.size(), why.c_str());
    }
    Launcher::replay(list, slots, state);
  }
};

}  // namespace

Launcher& cuda::launcher() {
  static CudaLauncher l;
  return l;
}

}  // namespace kiln::runtime
