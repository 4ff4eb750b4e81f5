// nn::Dropout: F::dropout switched by the module's training mode.
#include "kiln/functional.h"
#include "kiln/nn/activation.h"

namespace kiln::nn {

DropoutImpl::DropoutImpl(double p) : p(p) {
  if (!(p >= 0 && p <= 1)) module_error("Dropout", "p must be in [0, 1], got " + std::to_string(p));
}

Tensor DropoutImpl::forward(const Tensor& x) const { return F::dropout(x, p, is_training()); }

}  // namespace kiln::nn
