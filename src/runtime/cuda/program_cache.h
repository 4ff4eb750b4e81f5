// Compiled CUDA kernels: NVRTC compiles for the device's own architecture (sm_90 on Hopper); the
// cubins are cached in memory and on disk (KILN_CACHE_DIR), keyed by the content hash of (source,
// architecture, NVRTC version, options). The kernels a schedule still needs compile in groups side by side
// (program_cache.h: compile_groups).
#pragma once
#include <string>
#include <vector>

#include "codegen/render_cuda.h"
#include "runtime/cuda/api.h"
#include "runtime/program_cache.h"

namespace kiln::runtime::cuda {

using runtime::KernelSource;  // symbol: the extern "C" kernel name

// Forgets the kernels held in memory (modules stay loaded: functions handed out may be in use).
void clear_function_cache();
std::vector<CUfunction> load_kernels(int ordinal, const std::vector<KernelSource>& kernels);
// One self-contained translation unit (no kiln prelude, C++ standard `std`, e.g. "c++20") with the
// kernel `symbol`, cached in memory and on disk like generated kernels, keyed by the full source and
// the compiler; `what` names it in errors (which carry the NVRTC log).
CUfunction load_program(int ordinal, const std::string& what, const std::string& source,
                        const std::string& symbol, const std::string& std);
// Launches f on the device's stream over bufs (device addresses, one per kernel parameter). A launch
// whose blocks share outputs (l.split > 1) needs l.scratch_bytes of scratch: `scratch` when given (the
// caller keeps it as long as the launch may run again: a CUDA graph), else a block of the allocator's
// that goes back to it once the launch is queued.
void launch(int ordinal, CUfunction f, const codegen::CudaLaunch& l, const std::vector<void*>& bufs,
            CUdeviceptr scratch = 0);

}  // namespace kiln::runtime::cuda
