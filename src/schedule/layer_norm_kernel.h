// The layer norm kernel in a schedule: a LAYER_NORM node (ir/layer_norm_parts.h) is a kernel of its
// own that a runner runs (engine/runners.h), reading its sources as whole buffers. The parts of one
// pass over the same sources (the forward's y, mean and rstd; the backward's dx, dweight and dbias)
// are one kernel. Its AST is SINK(LAYER_NORM(DEFINE_GLOBAL n, ...) ...): output i is the i-th
// LAYER_NORM (global i, its part in args, eps as fval), the globals after the outputs its sources.
#pragma once
#include <vector>

#include "ir/node.h"

namespace kiln::schedule {

// Whether layer norm nodes a and b are parts of one pass over the same sources.
bool layer_norm_partners(const ir::Node& a, const ir::Node& b);
// The kernel AST of the layer norm nodes `outs` (partners, in the order of their globals); the
// kernel's inputs are outs[0]->src.
ir::NodeRef layer_norm_ast(const std::vector<ir::NodeRef>& outs);

}  // namespace kiln::schedule
