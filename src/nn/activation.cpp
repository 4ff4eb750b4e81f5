// Activation modules with arguments to check (GELU, Softmax, LogSoftmax).
#include "kiln/nn/activation.h"

namespace kiln::nn {

GELUImpl::GELUImpl(const std::string& approximate) : tanh_(approximate == "tanh") {
  if (approximate != "none" && approximate != "tanh")
    module_error("GELU", "approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
}

namespace {
void check_dim(const char* module, int64_t dim, const Tensor& x) {
  int64_t n = std::max<int64_t>(x.dim(), 1);
  if (dim < -n || dim >= n)
    module_error(module,
                 "dim " + std::to_string(dim) + " out of range for input of shape " + shape_str(x.shape()));
}
}  // namespace

Tensor SoftmaxImpl::forward(const Tensor& x) const {
  check_dim("Softmax", dim, x);
  return x.softmax(dim);
}

Tensor LogSoftmaxImpl::forward(const Tensor& x) const {
  check_dim("LogSoftmax", dim, x);
  return x.log_softmax(dim);
}

}  // namespace kiln::nn
