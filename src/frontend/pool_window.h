// The one pooling (window) construction shared by convolution and pooling: a view of every
// sliding window of a tensor, built from movement ops only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::frontend {

// Number of windows of size k (dilation d, stride s) that fit in n elements; 0 when none fit (also
// when d * (k - 1) overflows int64).
int64_t pool_out_size(int64_t n, int64_t k, int64_t s, int64_t d);

// x: (lead..., L_1..L_m) with m = kernel.size(), already padded. Returns the view
// (lead..., O_1..O_m, K_1..K_m) whose element (o, k) is x[o * stride + k * dilation] per dim. Only
// reshape/expand/shrink/pad/permute: no copy. Every O_i must be positive. Errors name `op`.
Tensor pool_windows(const std::string& op, const Tensor& x, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation);

}  // namespace kiln::frontend
