// The flash-attention kernels of an attention kernel AST (schedule/attention_layout.h): CUDA source
// made of constants for the layout and tile sizes and the hand-written kernel
// (flash_attention_kernel.cpp), launched on an explicit grid of one block per query tile.
#pragma once
#include "codegen/passes.h"

namespace kiln::codegen {

// The kernels' CUDA text: helpers both directions share, the forward, the backward.
const char* flash_attention_common_source();
const char* flash_attention_kernel_source();
const char* flash_attention_backward_kernel_source();
// Whether the kernels handle this ATTENTION node (any part): f16 or bf16 values, D = Dv of 64 or 128,
// Tk >= 1.
// (Whether a device runs it at all is its backend's answer: runtime/backend.h.)
bool flash_attention_fits(const ir::Node& attention);
// ast = SINK(ATTENTION(...)); CUDA only.
Lowered lower_attention(const ir::NodeRef& ast, Target target);

}  // namespace kiln::codegen
