// F::layer_norm as LAYER_NORM graph nodes (KILN_LAYERNORM=tile): a runner of the device computes them
// (the tile layer's, engine/runners.h); where none does, the graph rewrites put the composite of
// primitive ops defined here in their place. Their gradient is the backward's LAYER_NORM nodes.
#pragma once
#include <optional>
#include <vector>

#include "ir/layer_norm_parts.h"
#include "ir/node.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

// Whether layer_norm of `input` builds LAYER_NORM nodes: KILN_LAYERNORM=tile (anything but "tile"
// and "generated" is a kiln::Error) and a non-empty floating-point input.
bool layer_norm_nodes_apply(const Tensor& input);
// layer_norm over the trailing dims `normalized_shape` (arguments checked by the caller) as the
// LAYER_NORM node of its output over input seen as (N, C); weight and bias default to ones and zeros.
Tensor layer_norm_node(const Tensor& input, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps);
// The LAYER_NORM node computing `part` over `src` (ir/layer_norm_parts.h).
ir::NodeRef layer_norm_part(ir::LayerNormPart part, const std::vector<ir::NodeRef>& src, double eps);
// The part the LAYER_NORM node n computes, from primitive ops (in f32 for 16-bit data).
Tensor layer_norm_composite(const ir::NodeRef& n);
// Gradients of the sources of the LAYER_NORM node n, given the gradient g of its value: for the
// output, the backward's parts; for the other parts, the gradient of their composite.
std::vector<std::optional<Tensor>> layer_norm_backward(const ir::NodeRef& n, const Tensor& g);

}  // namespace kiln::frontend
