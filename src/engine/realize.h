// realize: the driver of the pipeline, as named stages (engine/stages.h): graph rewrites ->
// schedule -> lower (cached) -> compile (the backend, cached) -> memory plan -> bind -> run ->
// (KILN_VALIDATE) check each kernel against the interpreter.
#pragma once
#include <vector>

#include "ir/node.h"
#include "kiln/device.h"

namespace kiln::engine {

// After this, every root has node->buffer set.
void realize(const std::vector<ir::NodeRef>& roots, Device device);

// Whether this thread is inside realize(): frontend code the passes call (attention's lowering
// builds Tensors) must not start another realize from there.
bool realizing();

}  // namespace kiln::engine
