// realize: the driver of the pipeline. Graph rewrites -> schedule -> lower (cached) -> compile
// (cached) -> run on the thread pool -> (KILN_VALIDATE) check each kernel against the interpreter.
#pragma once
#include <vector>

#include "ir/node.h"
#include "kiln/device.h"

namespace kiln::runtime {

// After this, every root has node->buffer set.
void realize(const std::vector<ir::NodeRef>& roots, Device device);

// Whether this thread is inside realize(): frontend code the passes call (attention's lowering
// builds Tensors) must not start another realize from there.
bool realizing();

}  // namespace kiln::runtime
