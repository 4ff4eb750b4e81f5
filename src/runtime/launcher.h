// Kernel launches, the last step of the pipeline: a compiled program, its buffer arguments and its
// launch size. A captured step (kiln::Jit) is a list of launches over a table of buffer slots that
// replay() runs again; each device backend (runtime/backend.h) has its own Launcher (CUDA:
// runtime/cuda/launcher.cpp, which replays through CUDA graphs).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "codegen/render_cuda.h"
#include "runtime/buffer.h"
#include "schedule/match_matmul.h"

namespace kiln::runtime {

struct Launch {
  // The loaded program, which only the backend that loaded it runs (a KernelFn on the CPU, a
  // CUfunction on CUDA), and how it runs: see Launch::of.
  void* program = nullptr;
  std::string name;           // for messages
  Device device;              // where it runs
  int64_t zero_bytes = 0;     // bytes of args[0] set to zero first (codegen::Program::zero_bytes)
  int64_t outer_size = 1;     // the program's outer loop, [0, outer_size)
  bool parallel = false;      // CPU: split the outer loop over the thread pool
  size_t nargs = 0;           // the program's parameters (one buffer each)
  int64_t scratch_bytes = 0;  // CPU: a per-thread scratch the launcher passes after the nargs buffers
  codegen::CudaLaunch cuda;   // CUDA: how the kernel maps onto threads
  // Symbolic sizes: the VARs whose values its last argument holds, in slot order (ir::vars_of), else
  // null. A replay at other values writes that argument again (kiln::Jit).
  std::shared_ptr<const std::vector<ir::NodeRef>> vars;
  // A symbolic outer loop: its trip count from the arguments (at most outer_size), else null.
  std::function<int64_t(void* const* args)> outer_extent;
  // A matmul the backend's GEMM library runs instead of the program (which stays the fallback); its
  // operands are args[nouts + input index]. The match is shared by every launch of the kernel; tf32
  // (KILN_TF32 when the kernel was scheduled) sets its descriptor's allow_tf32 at each launch.
  std::shared_ptr<const schedule::MatchedMatmul> gemm;
  bool tf32 = false;
  size_t nouts = 0;
  // the operands' offsets in their buffers (aux: an aux matrix the epilogue reads)
  int64_t a_bytes = 0, b_bytes = 0, bias_bytes = 0, aux_bytes = 0;
  // A launch whose runner fixes sizes on the host (a GEMM's descriptor) for symbolic ones: a replay
  // at other values calls it with them (in `vars` order) to set the launch for those values first.
  std::function<void(Launch&, const int64_t* values)> rebind;
  // A kernel at this realize's sizes that reads tensors with symbolic dims as wholes (an attention
  // or layer norm kernel, whose runner takes concrete sizes): a replay at other values would
  // compute the recorded sizes, so kiln::Jit does not capture a step with one.
  bool fixed_over_symbolic = false;
  // A kernel that a runner of the engine runs itself (a tile program: engine/runners.h): the launcher
  // calls this instead of the program, with the kernel's arguments. It only queues work on the
  // device (no host waits, no allocations), so that a CUDA graph can capture it.
  std::function<void(void* const* args)> call;

  // The launch of a lowered program on device d, loaded as `program` (parallel stays for the backend).
  static Launch of(const codegen::Lowered& l, Device d, void* program);
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
  // Whether replay() keeps the slot pointers it is given (a CUDA graph): a list's inputs should
  // then come at the same addresses each time.
  virtual bool replay_keeps_addresses() const { return false; }
};

}  // namespace kiln::runtime
