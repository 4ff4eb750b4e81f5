// The lowering pass list, in one place: kernel AST -> optimized AST -> linear program -> C source.
#pragma once
#include <string>
#include <vector>

#include "codegen/device_limits.h"
#include "codegen/program.h"
#include "codegen/render_cuda.h"
#include "ir/node.h"

namespace kiln::codegen {

enum class Target { CPU, CUDA };

struct Lowered {
  Program program;
  std::string source;             // C or CUDA source of this kernel (without the shared prelude)
  std::vector<std::string> opts;  // optimizations applied (KILN_DEBUG=3)
  CudaLaunch launch;              // CUDA: how the kernel maps onto threads
};

// `limits`: the device the kernel is for (CUDA: they size its shared memory).
Lowered lower(const ir::NodeRef& ast, Target target = Target::CPU, const DeviceLimits& limits = {});
std::string kernel_name(const ir::NodeRef& ast);  // E_<sizes> or r_<output sizes>_<reduce sizes>

}  // namespace kiln::codegen
