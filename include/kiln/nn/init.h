// kiln::nn::init: PyTorch's default parameter initializations, drawn from the global generator
// (kiln::manual_seed makes models reproducible). Each returns a new f32 tensor.
#pragma once
#include "kiln/tensor.h"

namespace kiln::nn::init {

Tensor uniform(Shape s, double low, double high);
Tensor normal(Shape s, double mean = 0, double stdev = 1);
// U(-b, b), b = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)); a = sqrt(5) gives
// b = 1 / sqrt(fan_in), the default of Linear and Conv weights.
Tensor kaiming_uniform(Shape s, int64_t fan_in, double a);
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))
Tensor xavier_uniform(Shape s, int64_t fan_in, int64_t fan_out, double gain = 1);
// U(-1 / sqrt(fan_in), 1 / sqrt(fan_in)): biases of Linear and Conv, RNN weights (fan_in = hidden)
Tensor fan_in_uniform(Shape s, int64_t fan_in);

}  // namespace kiln::nn::init
