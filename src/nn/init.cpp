// PyTorch's default initializations (uniform, normal, kaiming, xavier) from the global generator.
#include "kiln/nn/init.h"

#include <cmath>

#include "kiln/nn/module.h"

namespace kiln::nn::init {

Tensor uniform(Shape s, double low, double high) { return kiln::uniform(low, high, std::move(s)); }
Tensor normal(Shape s, double mean, double stdev) { return kiln::normal(mean, stdev, std::move(s)); }

Tensor kaiming_uniform(Shape s, int64_t fan_in, double a) {
  if (fan_in <= 0) module_error("init", "kaiming_uniform: fan_in must be > 0, got " + std::to_string(fan_in));
  double gain = std::sqrt(2.0 / (1 + a * a)), b = gain * std::sqrt(3.0 / static_cast<double>(fan_in));
  return uniform(std::move(s), -b, b);
}

Tensor xavier_uniform(Shape s, int64_t fan_in, int64_t fan_out, double gain) {
  double b = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform(std::move(s), -b, b);
}

Tensor fan_in_uniform(Shape s, int64_t fan_in) {
  double b = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
  return uniform(std::move(s), -b, b);
}

}  // namespace kiln::nn::init
