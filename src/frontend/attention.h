// Scaled dot-product attention (F::scaled_dot_product_attention) beyond its frontend function: the
// composite of primitive ops that computes it where no attention kernel runs, its gradient, and
// the rewrite rule that puts the composite in place of ATTENTION nodes no kernel takes.
#pragma once
#include <vector>

#include "ir/node.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

// softmax(q k^T * scale, masked above the diagonal when causal) v, from primitive ops (matmuls,
// a where, a softmax): the forward of every device without the kernel, and what the backward
// recomputes. q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) with equal batch dims.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale);
// Gradients of q, k and v of the ATTENTION node n, given the gradient g of its output.
std::vector<std::optional<Tensor>> attention_backward(const ir::NodeRef& n, const Tensor& g);
// Whether the flash-attention kernel (codegen/flash_attention.h) computes the ATTENTION node n: on
// a CUDA device of compute capability 8.0 or newer, f16 or bf16, D == Dv in {64, 128}, Tk >= 1.
bool attention_kernel_runs(const ir::NodeRef& n);
// The composite that replaces the ATTENTION node n where no kernel computes it, else nullptr (the
// graph rewrites' rule before scheduling, registered with ir::set_lowering).
ir::NodeRef lower_attention(const ir::NodeRef& n);

}  // namespace kiln::frontend
