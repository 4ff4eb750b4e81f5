// KILN_VALIDATE=1: a kernel's outputs checked against the reference interpreter (interpreter.h),
// right after the kernel runs (engine/run.cpp): later kernels may reuse its arena memory.
#pragma once
#include <memory>
#include <vector>

#include "codegen/program.h"
#include "runtime/buffer.h"
#include "schedule/schedule.h"

namespace kiln::engine {

// Throws a kiln::Error naming the kernel, the output and the first element that differs by more than
// its dtype's tolerance. `outs` are the kernel's output buffers, bound to k.outputs.
void validate(const schedule::Kernel& k, const codegen::Program& p,
              const std::vector<std::shared_ptr<Buffer>>& outs);

}  // namespace kiln::engine
