// layer_norm through the tile kernels (see layer_norm_tile.h): when it applies, and the hook the
// tile layer fills.
#include "frontend/layer_norm_tile.h"

#include "frontend/graph.h"
#include "kiln/debug.h"

namespace kiln::frontend {

namespace {
TileLayerNorm& hook() {
  static TileLayerNorm f = nullptr;
  return f;
}
}  // namespace

bool set_tile_layer_norm(TileLayerNorm f) {
  hook() = f;
  return true;
}

bool tile_layer_norm_applies(const Tensor& input) {
  const std::string& mode = settings().layernorm;
  if (mode != "tile" && mode != "generated")
    fail("layer_norm",
         "KILN_LAYERNORM (settings().layernorm) must be 'tile' or 'generated', got '" + mode + "'");
  return mode == "tile" && input.device().is_cpu() && input.numel() > 0 &&
         (input.dtype() == DType::F32 || input.dtype() == DType::BF16);
}

Tensor tile_layer_norm(const Tensor& input, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  if (!hook())
    fail("layer_norm",
         "KILN_LAYERNORM=tile asks for the tile kernels, but this program was linked without "
         "them (link kiln::kiln, which keeps kiln_tile_layer_norm)");
  return hook()(input, normalized_shape, weight, bias, eps);
}

}  // namespace kiln::frontend
