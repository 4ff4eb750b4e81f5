// Host entry points of the kernels shipped in kernels/ (fused broadcast, layernorm): each builds the
// tile program for its tensors (block shapes, work split over the cores, compile-time args), runs it
// and returns the results. Data is f32 or bf16; statistics and accumulation are f32.
#pragma once
#include "kiln/tensor.h"
#include "kiln/tile.h"

namespace kiln::tile {

// How a kernel splits its output over the cores.
enum class Split { Rows, Cols };

// y = a * b + tanh(c), a and b (M, N), c (1, N) broadcast over the rows
// (kernels/broadcast/mul_add_tanh_{rows,cols}.cpp).
Tensor mul_add_tanh(const Tensor& a, const Tensor& b, const Tensor& c, Split split, int cores);

struct LayerNormForward {
  Tensor out;         // x's shape and dtype
  Tensor mean, rstd;  // (N,) f32, N = the rows of x seen as 2D (N, C)
};
// llm.c's layernorm_forward over the last dim of x, rows split over `cores`
// (kernels/layernorm/forward.cpp). weight and bias: (C,).
LayerNormForward layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                   int cores);

// Who computes dweight and dbias in the backward.
enum class WeightGrads {
  SingleCore,   // the rows kernel on one core: the reference
  OverColumns,  // dx over rows, then each core owns a range of columns of dweight/dbias
  OverRows,     // rows over a 2D grid, per-core partials reduced across the grid (semaphores, multicast)
};

struct LayerNormBackward {
  Tensor dx;              // x's shape and dtype
  Tensor dweight, dbias;  // (C,), weight's dtype: dweight_in + this batch's gradient
};
// llm.c's layernorm_backward given the forward's mean and rstd; dweight_in / dbias_in are the
// gradients to accumulate into (undefined: zeros). `grid`: the cores (OverRows needs a 2D grid;
// OverColumns uses grid.size() cores; SingleCore ignores it).
LayerNormBackward layernorm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& dweight_in,
                                     const Tensor& dbias_in, WeightGrads strategy, Grid grid);

}  // namespace kiln::tile
