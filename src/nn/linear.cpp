// nn::Linear: an affine map over the last dimension.
#include "kiln/nn/linear.h"

#include <cmath>

#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "nn/util.h"

namespace kiln::nn {

using detail::positive;

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias)
    : in_features(positive("Linear", "in_features", in)),
      out_features(positive("Linear", "out_features", out)),
      weight(register_parameter("weight", init::kaiming_uniform({out, in}, in, std::sqrt(5.0)))),
      bias(register_parameter("bias", with_bias ? init::fan_in_uniform({out}, in) : Tensor())) {}

Tensor LinearImpl::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_features)
    module_error("Linear", "expected input of shape (..., " + std::to_string(in_features) + "), got " +
                               shape_str(x.shape()));
  return F::linear(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

}  // namespace kiln::nn
