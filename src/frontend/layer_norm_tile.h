// F::layer_norm through the tile kernels of kernels/layernorm (KILN_LAYERNORM=tile): forward and
// backward run as tile programs on the CPU, joined to autograd as an external op (external.h) by the
// tile layer, which registers itself here.
#pragma once
#include <optional>

#include "kiln/tensor.h"

namespace kiln::frontend {

// Whether layer_norm of `input` runs through the tile kernels: the setting asks for it, and the
// input is a non-empty f32 or bf16 CPU tensor (anything else takes the generated kernels).
bool tile_layer_norm_applies(const Tensor& input);

// layer_norm over the trailing dims `normalized_shape` (arguments checked by the caller), by the
// function the tile layer registered (src/tile/ops/layer_norm_autograd.cpp; the tile layer sits above
// the frontend, whose Tensors its programs take).
Tensor tile_layer_norm(const Tensor& input, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps);

using TileLayerNorm = Tensor (*)(const Tensor& input, const Shape& normalized_shape,
                                 const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                 double eps);
// Registers the tile layer's layer_norm (as the program starts); returns true.
bool set_tile_layer_norm(TileLayerNorm f);

}  // namespace kiln::frontend
