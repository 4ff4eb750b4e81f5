// External ops: values computed outside the compiler (tile kernels) that still take part in
// autograd. The value is computed when the op is called, so its EXTERNAL node is created realized:
// the scheduler reads it as a buffer (a realize boundary) and never needs to know how it was made.
// Its sources are the op's inputs, so autograd walks through it and calls the op's backward.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "ir/node.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

// Gradients of an external op's inputs, given the gradient of its output (nullopt: none flows).
using ExternalBackward = std::function<std::vector<std::optional<Tensor>>(const Tensor& grad)>;

// `value` (computed already) as the output of an op over `inputs`. When no input requires a
// gradient, `value` itself. The gradients backward returns are values, not graphs: gradients of
// gradients do not flow through external ops.
Tensor external(const std::vector<Tensor>& inputs, const Tensor& value, ExternalBackward backward);

// The gradient rule of an EXTERNAL node (autograd.cpp).
std::vector<std::optional<Tensor>> external_backward(const ir::NodeRef& n, const Tensor& grad);

}  // namespace kiln::frontend
