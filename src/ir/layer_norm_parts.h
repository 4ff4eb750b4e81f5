// The parts of layer norm a LAYER_NORM node computes (ir/ops.h): the forward's output and statistics,
// and the backward's gradients. One kernel computes the parts of one pass over the same sources.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::ir {

// What a LAYER_NORM node computes; its args are {part}, its fval eps. Over rows of C elements,
// mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps), xhat = (x - mean) * rstd:
//   Y, Mean, Rstd (sources x (N, C), weight (C), bias (C), one dtype):
//       xhat * weight + bias (N, C) in x's dtype; mean and rstd (N) in f32 (f64 for f64 x)
//   Dx, Dweight, Dbias (sources dy (N, C), x, weight, mean, rstd):
//       rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight, (N, C) in x's dtype;
//       sum over rows of dy * xhat and of dy, (C) in weight's dtype
enum class LayerNormPart : int64_t { Y = 0, Mean = 1, Rstd = 2, Dx = 3, Dweight = 4, Dbias = 5 };

inline LayerNormPart layer_norm_part(const std::vector<int64_t>& arg) {
  return static_cast<LayerNormPart>(arg.at(0));
}
inline bool is_forward(LayerNormPart p) { return p <= LayerNormPart::Rstd; }
inline int layer_norm_sources(LayerNormPart p) { return is_forward(p) ? 3 : 5; }

}  // namespace kiln::ir
