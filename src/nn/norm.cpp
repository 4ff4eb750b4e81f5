// Normalization modules over F::layer_norm, F::rms_norm, F::group_norm and F::batch_norm.
#include "kiln/nn/norm.h"

#include <algorithm>

#include "kiln/functional.h"
#include "nn/util.h"

namespace kiln::nn {

namespace {
Shape checked_shape(const char* module, Shape s) {
  if (s.empty()) module_error(module, "normalized_shape must not be empty");
  for (auto d : s)
    if (d <= 0) module_error(module, "normalized_shape must be positive, got " + shape_str(s));
  return s;
}

void check_trailing(const char* module, const Shape& norm, const Tensor& x) {
  detail::need_float(module, x);
  bool ok = x.dim() >= static_cast<int64_t>(norm.size()) &&
            Shape(x.shape().end() - static_cast<int64_t>(norm.size()), x.shape().end()) == norm;
  if (!ok) {
    std::string want;
    for (auto d : norm) want += ", " + std::to_string(d);
    module_error(module, "expected input of shape (..." + want + "), got " + shape_str(x.shape()));
  }
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }
}  // namespace

LayerNormImpl::LayerNormImpl(Shape s, double eps, bool affine, bool with_bias)
    : normalized_shape(checked_shape("LayerNorm", s)),
      eps(eps),
      weight(register_parameter("weight", affine ? ones(s) : Tensor())),
      bias(register_parameter("bias", affine && with_bias ? zeros(s) : Tensor())) {}

Tensor LayerNormImpl::forward(const Tensor& x) const {
  check_trailing("LayerNorm", normalized_shape, x);
  return F::layer_norm(x, normalized_shape, opt(weight), opt(bias), eps);
}

RMSNormImpl::RMSNormImpl(Shape s, std::optional<double> eps, bool affine)
    : normalized_shape(checked_shape("RMSNorm", s)),
      eps(eps),
      weight(register_parameter("weight", affine ? ones(s) : Tensor())) {}

Tensor RMSNormImpl::forward(const Tensor& x) const {
  check_trailing("RMSNorm", normalized_shape, x);
  return F::rms_norm(x, normalized_shape, opt(weight), eps);
}

GroupNormImpl::GroupNormImpl(int64_t groups, int64_t channels, double eps, bool affine)
    : num_groups(detail::positive("GroupNorm", "num_groups", groups)),
      num_channels(detail::positive("GroupNorm", "num_channels", channels)),
      eps(eps),
      weight(register_parameter("weight", affine ? ones({channels}) : Tensor())),
      bias(register_parameter("bias", affine ? zeros({channels}) : Tensor())) {
  if (channels % groups != 0)
    module_error("GroupNorm", "num_groups (" + std::to_string(groups) + ") must divide num_channels (" +
                                  std::to_string(channels) + ")");
}

Tensor GroupNormImpl::forward(const Tensor& x) const {
  detail::need_float("GroupNorm", x);
  if (x.dim() < 2 || x.size(1) != num_channels)
    module_error("GroupNorm", "expected input of shape (N, " + std::to_string(num_channels) + ", ...), got " +
                                  shape_str(x.shape()));
  return F::group_norm(x, num_groups, opt(weight), opt(bias), eps);
}

BatchNormImpl::BatchNormImpl(const char* name, std::vector<int64_t> ranks, int64_t c, double eps,
                             double momentum, bool affine, bool track)
    : num_features(detail::positive(name, "num_features", c)),
      eps(eps),
      momentum(momentum),
      track_running_stats(track),
      weight(register_parameter("weight", affine ? ones({c}) : Tensor())),
      bias(register_parameter("bias", affine ? zeros({c}) : Tensor())),
      running_mean(register_buffer("running_mean", track ? zeros({c}) : Tensor())),
      running_var(register_buffer("running_var", track ? ones({c}) : Tensor())),
      name_(name),
      ranks_(std::move(ranks)) {}

Tensor BatchNormImpl::forward(const Tensor& x) {
  detail::need_float(name_, x);
  bool rank_ok = std::find(ranks_.begin(), ranks_.end(), x.dim()) != ranks_.end();
  if (!rank_ok || x.size(1) != num_features) {
    std::string c = std::to_string(num_features);
    std::string want = ranks_.size() == 2 ? "(N, " + c + ") or (N, " + c + ", L)" : "(N, " + c + ", H, W)";
    module_error(name_, "expected input of shape " + want + ", got " + shape_str(x.shape()));
  }
  bool batch_stats = is_training() || !track_running_stats;
  Tensor* rm = track_running_stats ? &running_mean : nullptr;
  Tensor* rv = track_running_stats ? &running_var : nullptr;
  return F::batch_norm(x, rm, rv, opt(weight), opt(bias), batch_stats, momentum, eps);
}

}  // namespace kiln::nn
