// Kernel launches, the last step of the pipeline: a compiled program, its buffer arguments and its
// launch size. A captured step (kiln::Jit) is a list of launches over a table of buffer slots that
// replay() runs again; a device backend implements its own Launcher (CUDA: runtime/cuda/launcher.cpp,
// which replays through CUDA graphs).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/render_cuda.h"
#include "runtime/buffer.h"
#include "runtime/cuda/api.h"
#include "runtime/program_cache.h"
#include "schedule/match_matmul.h"

namespace kiln::runtime {

struct Launch {
  KernelFn fn = nullptr;               // the loaded program (CPU)
  std::string name;                    // for messages
  int64_t zero_bytes = 0;              // bytes of args[0] set to zero first (codegen::Program::zero_bytes)
  int64_t outer_size = 1;              // the program's outer loop, [0, outer_size)
  bool parallel = false;               // split the outer loop over the thread pool
  Device device;                       // where it runs
  cuda::CUfunction cuda_fn = nullptr;  // CUDA: the loaded kernel and how it maps onto threads
  codegen::CudaLaunch cuda;
  size_t nargs = 0;  // CUDA: kernel parameters (one buffer each)
  // CUDA: a matmul cuBLASLt runs instead of the kernel (which stays the fallback); its operands are
  // args[nouts + input index]. The match is shared by every launch of the kernel; tf32 (KILN_TF32
  // when the kernel was scheduled) sets its descriptor's allow_tf32 at each launch.
  std::shared_ptr<const schedule::MatchedMatmul> gemm;
  bool tf32 = false;
  size_t nouts = 0;
  int64_t a_bytes = 0, b_bytes = 0, bias_bytes = 0;  // the operands' offsets in their buffers
};

// A launch whose argument j is slots[slots_of_args[j]] of the table replay() is given.
struct SlotLaunch {
  Launch launch;
  std::vector<int32_t> args;
};

// What a launcher keeps between replays of one list (CUDA: the list's graphs). The owner of the list
// keeps it with the list (empty at first) and destroys it with the list.
class ReplayState {
 public:
  virtual ~ReplayState() = default;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual void launch(const Launch& l, void** args) = 0;
  // Runs the list in order with argument pointers taken from `slots`. This default launches each
  // entry and keeps no state.
  virtual void replay(const std::vector<SlotLaunch>& list, const std::vector<void*>& slots,
                      std::unique_ptr<ReplayState>& state);
};

// Runs programs in this process, on the thread pool.
Launcher& cpu_launcher();
// Queues kernels on the device's stream.
Launcher& cuda_launcher();
Launcher& launcher(Device d);

// Sees every launch the realize driver makes on this thread while installed (jit capture).
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual void launched(const Launch& l, const std::vector<std::shared_ptr<Buffer>>& outputs,
                        const std::vector<std::shared_ptr<Buffer>>& inputs) = 0;
};
LaunchObserver*& launch_observer();  // thread-local; nullptr when none

}  // namespace kiln::runtime
