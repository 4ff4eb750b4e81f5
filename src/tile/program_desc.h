// Everything a tile Program declares; the host API fills it, codegen and the backends read it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tile.h"
#include "kiln/tile/cuda_abi.h"
#include "runtime/buffer.h"

namespace kiln::tile {

namespace cuda {
struct Plan;  // src/tile/cuda/launch.cpp
}

struct TensorDecl {
  std::string name;
  DType dtype;
  Indexing indexing;
  bool output;
  Tensor value;  // inputs: the bound tensor; outputs: the result after run()
  Shape shape;   // outputs
  Fill fill = Fill::Zeros;
};

struct CBDecl {
  std::string name;
  int rows, cols;  // tiles
  DType dtype;
  int buffer_factor;
  int tile_rows = 32;  // elements per tile row (short tiles: 1, 2, 4, 8, 16)
  int64_t height() const { return int64_t{rows} * tile_rows; }  // element rows of a block
  int64_t width() const { return int64_t{cols} * 32; }
  size_t block_bytes() const { return static_cast<size_t>(height() * width()) * dtype_size(dtype); }
  // "2x3 tiles", or "2x3 tiles of 8x32" for short tiles
  std::string shape_str() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + " tiles" +
           (tile_rows == 32 ? "" : " of " + std::to_string(tile_rows) + "x32");
  }
};

struct Program::Desc {
  std::string name, file, source;
  Grid grid;
  std::vector<TensorDecl> tensors;
  std::vector<CBDecl> cbs;
  std::vector<std::string> semaphores;
  std::vector<std::pair<std::string, int64_t>> constants;
  std::vector<std::string> arg_names;
  std::vector<int64_t> args;  // per core, arg_names.size() values each (zeros where not set)
  std::vector<std::string> dm_roles{"reader", "writer"};
  std::string compute_role = "compute";
  int compute_warps = 0;  // on a GPU; 0: the default
  // What a GPU launch made of these declarations (the kernel, the CB layout, the fixed launch
  // parameters), reused by the next launch; every change to a declaration drops it.
  std::shared_ptr<const cuda::Plan> cuda_plan;
  void changed() { cuda_plan.reset(); }
};

enum class Target { Cpu, Cuda };
// On CUDA a core is a thread block: the compute role on cuda_compute_warps(d) warps (the program's
// gpu_compute_warps, else 4 or KILN_TILE_COMPUTE_WARPS: 1, 2, 4, 8 or 16), each data-movement role
// on one more warp (include/kiln/tile/cuda_device.h).
int cuda_compute_warps(const Program::Desc& d);
// KILN_TILE_TRACE=<core>: the core whose timeline a GPU launch records and prints; -1: none.
int trace_core();
// A kernel source position for messages: "k.cpp:7", or for a negative line (abi::Loc) "the end of
// the scope of the block taken at k.cpp:7".
std::string source_position(const std::string& file, int line);
// KILN_TILE_TIMEOUT_MS (Settings::tile_timeout_ms, read at each launch): how long a launch may go
// without progress before its watchdog reports it; `fallback` where it is unset (0).
long long watchdog_ms(long long fallback);
inline constexpr long long kGpuWatchdogMs = 2000;
// On the CPU a role stuck in kernel code costs a thread for the rest of the process (watchdog.cpp),
// and a machine shared with other work may stall a thread for a while: it waits longer.
inline constexpr long long kCpuWatchdogMs = 10000;
inline int cuda_warps(const Program::Desc& d) {
  return cuda_compute_warps(d) + static_cast<int>(d.dm_roles.size());
}
inline int cuda_threads(const Program::Desc& d) { return 32 * cuda_warps(d); }
inline constexpr const char* kCudaEntry = "kiln_tile_main";

// ---- CB memory per core (src/tile/cb_memory.cpp) ----
// On the GPU a core's CBs are rings in its thread block's shared memory. Each ring slot has a full,
// an empty and a dma mbarrier and a DMA count (8 bytes each); each CB keeps a set of counters per
// warp. The runtime's own per-block state (the launch parameters and BlockState in cuda_block_state.h)
// is static shared memory, under kStaticSharedReserve.
inline constexpr size_t kBarrierBytesPerSlot = cuda_abi::kBarrierBytesPerSlot;
inline constexpr size_t kCounterBytesPerWarp = 24;
inline constexpr int64_t kStaticSharedReserve = 2048;  // cuda_block_state.h asserts its state fits
// Shared memory of a Hopper multiprocessor, and what the GPU keeps of it per thread block.
inline constexpr int64_t kSharedPerSM = 228 * 1024, kSharedKeptPerBlock = 1024;
inline constexpr int64_t kHopperSMs = 132;  // an H100 or H200 SXM
struct CBLayout {
  struct Ring {
    size_t barrier_offset;  // of full[slots] then empty[slots]
    size_t data_offset;     // of slot 0
    size_t block_bytes;
    int shape;  // index in box_shapes; -1: wider than one tensor-copy box (8 tiles)
  };
  std::vector<Ring> cbs;  // in declaration order
  // The distinct block shapes (rows, cols in tiles) the bulk tensor copy engine can move with one
  // box per 256 rows: a tensor has a tensor map for each.
  std::vector<std::pair<int, int>> box_shapes;
  size_t barrier_bytes;  // the mbarriers of every CB, first, padded to 128 bytes
  size_t total;          // barriers + rings (each 128-byte aligned)
};
// Offsets as the GPU backend lays the CBs out in dynamic shared memory.
CBLayout layout_cbs(const Program::Desc& d);
// What the CBs may take of `shared_per_block` bytes of shared memory per thread block.
int64_t cb_memory_limit(int64_t shared_per_block);
// Throws kiln::Error naming the kernel, every CB (block shape, dtype, buffer factor, bytes), the
// total and the limit when the layout does not fit; `device` names the GPU the limit comes from.
// Both backends run it before compiling with their backend's limits().tile_core_bytes (the CPU one
// with device "": a Hopper GPU's limit, so an oversize kernel fails on a machine without a GPU too).
void check_cb_memory(const Program::Desc& d, const CBLayout& l, int64_t shared_per_block,
                     const std::string& device);

// The C++ source the compiler sees for `d` (src/tile/codegen.cpp); on CUDA the kernel-facing
// headers are still #included (the CUDA backend pastes them in before NVRTC sees the source).
std::string generate_source(const Program::Desc& d, Target target = Target::Cpu);
// Embedded at build time (cmake/embed_tile_sources.cmake): kernel-facing headers as (path under
// include/, text) and shipped kernels as (path under kernels/, text).
const std::vector<std::pair<std::string, std::string>>& embedded_headers();
const std::vector<std::pair<std::string, std::string>>& embedded_kernels();

namespace cpu {
// Compiles (cached) and runs the program on the CPU (src/tile/cpu/launch.cpp). With `at`, tensor i
// (in declaration order) lies at at[i]: the inputs are read and the outputs written there (zeroed
// first where their Fill says so), and no results are made.
void launch(Program::Desc& d, void* const* at = nullptr);
}  // namespace cpu

namespace cuda {
// Device memory of a runner's launches of one program (src/tile/runner_launch.cpp) that a CUDA graph
// keeps the addresses of: the runtime args (uploaded once), the error log and the scratch of
// semaphores and multicast state. Made at the first launch, which a graph never captures.
struct Fixed {
  std::shared_ptr<Buffer> args, log, scratch;
};
// Compiles (cached) and queues the program on a GPU, cuda:ordinal (src/tile/cuda/launch.cpp); its
// errors surface when the host next waits for the device (src/tile/cuda/in_flight.cpp). With `at`,
// tensor i lies at at[i] as in cpu::launch. With `fixed`, a launch while a CUDA graph is captured
// takes its memory from there and queues no check: it allocates nothing and waits for nothing.
void launch(const std::shared_ptr<Program::Desc>& d, int ordinal, void* const* at = nullptr,
            Fixed* fixed = nullptr);
// Whether the GPU tile backend runs programs on cuda:ordinal (a Hopper GPU or newer).
bool runs_on(int ordinal);
}  // namespace cuda

}  // namespace kiln::tile
