// The programs behind the shipped kernels' entry points (include/kiln/tile_ops.h), declared (block
// shapes, chunk sizes, work split, compile-time args) but not run: the entry points run them, tests
// read their CB memory and compile them for the GPU. Arguments are as the entry points take them,
// already checked.
#pragma once
#include "kiln/tile.h"
#include "kiln/tile_ops.h"

namespace kiln::tile::ops {

// A 1 x C row of `value` in dtype t on `device`, made once and kept: the forward's column mask and
// the backward's zero gradients to accumulate into cost no work per call.
Tensor constant_row(double value, int64_t C, DType t, Device device);

// kernels/broadcast/mul_add_tanh_{rows,cols}.cpp
Program mul_add_tanh_program(const Tensor& a, const Tensor& b, const Tensor& c, Split split, int cores);
// kernels/layernorm/forward.cpp
Program layernorm_forward_program(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                  int cores);
// kernels/layernorm/backward.cpp on `grid` (2D): dx, and with wgrad the weight gradients reduced
// across the grid into dweight_in / dbias_in (C elements each, the gradients' dtype).
Program layernorm_backward_program(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, const Tensor& dw_in,
                                   const Tensor& db_in, bool wgrad, Grid grid);
// kernels/layernorm/backward_wgrad_cols.cpp on `cores` cores: dweight and dbias over columns.
Program layernorm_wgrad_cols_program(const Tensor& dout, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dw_in, const Tensor& db_in, int cores);

}  // namespace kiln::tile::ops
