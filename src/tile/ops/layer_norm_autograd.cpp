// layer_norm through the tile kernels (KILN_LAYERNORM=tile, frontend/layer_norm_tile.h): the tile
// programs of kernels/layernorm joined to autograd as an external op, registered with the frontend.
#include <algorithm>

#include "frontend/external.h"
#include "frontend/layer_norm_tile.h"
#include "kiln/debug.h"
#include "kiln/tile_ops.h"
#include "runtime/thread_pool.h"

namespace kiln::tile {

namespace {

// A near-square 2D grid of `cores` cores, for the backward's cross-core weight-gradient reduction.
tile::Grid grid_of(int cores) {
  int rows = 1;
  for (int r = 1; r * r <= cores; r++)
    if (cores % r == 0) rows = r;
  return tile::Grid::grid2d(rows, cores / rows);
}

Tensor layer_norm_autograd(const Tensor& input, const Shape& normalized_shape,
                           const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                           double eps) {
  int64_t C = 1;
  for (int64_t d : normalized_shape) C *= d;
  int64_t N = input.numel() / C;
  DType t = input.dtype();
  bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  // the kernels see values; gradients reach input, weight and bias through the external node
  Tensor x = input.detach().reshape({N, C}).contiguous();
  Tensor w = (has_w ? weight->detach().reshape({C}) : ones({C})).to(t).contiguous();
  Tensor b = (has_b ? bias->detach().reshape({C}) : zeros({C})).to(t);
  x.realize();
  w.realize();
  int cores = std::max(1, runtime::pool_threads());
  tile::LayerNormForward fwd = tile::layernorm_forward(x, w, b, eps, cores);
  std::vector<Tensor> inputs{input};
  if (has_w) inputs.push_back(*weight);
  if (has_b) inputs.push_back(*bias);
  Shape in_shape = input.shape();
  auto backward = [=](const Tensor& g) {
    tile::LayerNormBackward r =
        tile::layernorm_backward(g.reshape({N, C}), x, w, fwd.mean, fwd.rstd, Tensor(), Tensor(),
                                 tile::WeightGrads::OverRows, grid_of(cores));
    std::vector<std::optional<Tensor>> grads{r.dx.reshape(in_shape)};
    if (has_w) grads.push_back(r.dweight.reshape(normalized_shape));
    if (has_b) grads.push_back(r.dbias.reshape(normalized_shape));
    return grads;
  };
  return frontend::external(inputs, fwd.out.reshape(in_shape), backward);
}

}  // namespace

}  // namespace kiln::tile

// Registers as the program starts; CMakeLists.txt (KILN_REGISTRATIONS) has the linker keep it.
extern "C" const bool kiln_tile_layer_norm =
    kiln::frontend::set_tile_layer_norm(&kiln::tile::layer_norm_autograd);
