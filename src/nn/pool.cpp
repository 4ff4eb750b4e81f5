// MaxPool2d, AvgPool2d and AdaptiveAvgPool2d modules over the F:: pooling functions.
#include "kiln/functional.h"
#include "kiln/nn/conv.h"

namespace kiln::nn {

namespace {
void check_input(const char* module, const Tensor& x) {
  if (x.dim() != 4) module_error(module, "expected input of shape (N, C, H, W), got " + shape_str(x.shape()));
}
}  // namespace

Tensor MaxPool2dImpl::forward(const Tensor& x) const {
  check_input("MaxPool2d", x);
  return F::max_pool2d(x, kernel_size, stride, padding, dilation);
}

Tensor AvgPool2dImpl::forward(const Tensor& x) const {
  check_input("AvgPool2d", x);
  return F::avg_pool2d(x, kernel_size, stride, padding, count_include_pad);
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x) const {
  check_input("AdaptiveAvgPool2d", x);
  return F::adaptive_avg_pool2d(x, output_size);
}

}  // namespace kiln::nn
