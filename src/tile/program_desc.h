// Everything a tile Program declares; the host API fills it, codegen and the backends read it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tile.h"

namespace kiln::tile {

struct TensorDecl {
  std::string name;
  DType dtype;
  Indexing indexing;
  bool output;
  Tensor value;  // inputs: the bound tensor; outputs: the result after run()
  Shape shape;   // outputs
};

struct CBDecl {
  std::string name;
  int rows, cols;
  DType dtype;
  int buffer_factor;
};

struct Program::Desc {
  std::string name, file, source;
  Grid grid;
  std::vector<TensorDecl> tensors;
  std::vector<CBDecl> cbs;
  std::vector<std::string> semaphores;
  std::vector<std::pair<std::string, int64_t>> constants;
  std::vector<std::string> arg_names;
  std::vector<std::vector<int64_t>> args;  // per core
  std::vector<std::string> dm_roles{"reader", "writer"};
  std::string compute_role = "compute";
};

enum class Target { Cpu, Cuda };
// On CUDA a core is a thread block: the compute role on this many warps, each data-movement role on
// one more warp (include/kiln/tile/cuda_device.h).
inline constexpr int kCudaComputeWarps = 4;
inline int cuda_threads(const Program::Desc& d) {
  return 32 * (kCudaComputeWarps + static_cast<int>(d.dm_roles.size()));
}
inline constexpr const char* kCudaEntry = "kiln_tile_main";

// The C++ source the compiler sees for `d` (src/tile/codegen.cpp); on CUDA the kernel-facing
// headers are still #included (the CUDA backend pastes them in before NVRTC sees the source).
std::string generate_source(const Program::Desc& d, Target target = Target::Cpu);
// Embedded at build time (cmake/embed_tile_sources.cmake): kernel-facing headers as (path under
// include/, text) and shipped kernels as (path under kernels/, text).
const std::vector<std::pair<std::string, std::string>>& embedded_headers();
const std::vector<std::pair<std::string, std::string>>& embedded_kernels();

namespace cpu {
// Compiles (cached) and runs the program on the CPU (src/tile/cpu/launch.cpp).
void launch(Program::Desc& d);
}  // namespace cpu

namespace cuda {
// Compiles (cached) and runs the program on a GPU, cuda:ordinal (src/tile/cuda/launch.cpp).
void launch(Program::Desc& d, int ordinal);
}  // namespace cuda

}  // namespace kiln::tile
