// Normalization layers (layer, RMS, batch, group norm), dropout and embedding as composites of
// tensor ops, with PyTorch's semantics and argument checks.
#include <limits>

#include "frontend/autocast.h"
#include "frontend/checks.h"
#include "frontend/graph.h"
#include "frontend/layer_norm.h"
#include "kiln/functional.h"

namespace kiln::nn::functional {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::fail;

namespace {

DType calc_of(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

void need_float(const char* op, const char* what, const Tensor& x) {
  if (!is_float(x.dtype()))
    fail(op, std::string(what) + " must be a float tensor, got " + to_string(x.dtype()) + " of shape " +
                 shape_str(x.shape()));
}

void check_param(const char* op, const char* what, const std::optional<Tensor>& p, const Shape& want) {
  if (p && p->defined() && p->shape() != want)
    fail(op, std::string(what) + " must have shape " + shape_str(want) + ", got " + shape_str(p->shape()));
}

// (C,) -> (1, C, 1, ...) for an input of `ndim` dims
Tensor per_channel(const Tensor& v, int64_t ndim) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[1] = v.numel();
  return v.reshape(s);
}

// mean and biased variance (two passes) over dims, kept as size 1
std::pair<Tensor, Tensor> moments(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor mean = x.mean(dims, true);
  Tensor d = x - mean;
  return {mean, (d * d).mean(dims, true)};
}

}  // namespace

Tensor layer_norm(const Tensor& input, Shape normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (AutocastOp ac{AutocastList::F32})
    return layer_norm(ac(input), normalized_shape, ac(weight), ac(bias), eps);
  need_float("layer_norm", "input", input);
  auto k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= input.dim();
  for (int64_t i = 0; ok && i < k; i++) ok = input.shape()[input.dim() - k + i] == normalized_shape[i];
  if (!ok)
    fail("layer_norm", "normalized_shape " + shape_str(normalized_shape) +
                           " does not match the trailing dims of input " + shape_str(input.shape()));
  check_param("layer_norm", "weight", weight, normalized_shape);
  check_param("layer_norm", "bias", bias, normalized_shape);
  if (frontend::layer_norm_nodes_apply(input))  // KILN_LAYERNORM=tile: a runner's kernels
    return frontend::layer_norm_node(input, normalized_shape, weight, bias, eps);
  std::vector<int64_t> dims;
  for (int64_t i = input.dim() - k; i < input.dim(); i++) dims.push_back(i);
  Tensor x = input.to(calc_of(input.dtype()));
  auto [mean, var] = moments(x, dims);
  Tensor y = (x - mean) * (var + eps).rsqrt();
  if (weight && weight->defined()) y = y * weight->to(x.dtype());
  if (bias && bias->defined()) y = y + bias->to(x.dtype());
  return y.to(input.dtype());
}

Tensor rms_norm(const Tensor& input, Shape normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  if (AutocastOp ac{AutocastList::F32}) return rms_norm(ac(input), normalized_shape, ac(weight), eps);
  need_float("rms_norm", "input", input);
  auto k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= input.dim();
  for (int64_t i = 0; ok && i < k; i++) ok = input.shape()[input.dim() - k + i] == normalized_shape[i];
  if (!ok)
    fail("rms_norm", "normalized_shape " + shape_str(normalized_shape) +
                         " does not match the trailing dims of input " + shape_str(input.shape()));
  check_param("rms_norm", "weight", weight, normalized_shape);
  std::vector<int64_t> dims;
  for (int64_t i = input.dim() - k; i < input.dim(); i++) dims.push_back(i);
  DType calc = calc_of(input.dtype());
  // as PyTorch: eps defaults to the computation type's epsilon; the weight multiplies after the
  // result is rounded back to the input dtype
  double e = eps ? *eps
                 : (calc == DType::F64 ? std::numeric_limits<double>::epsilon()
                                       : static_cast<double>(std::numeric_limits<float>::epsilon()));
  Tensor x = input.to(calc);
  Tensor y = (x * ((x * x).mean(dims, true) + e).rsqrt()).to(input.dtype());
  if (weight && weight->defined()) y = (y * *weight).to(input.dtype());
  return y;
}

Tensor batch_norm(const Tensor& input, Tensor* running_mean, Tensor* running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps) {
  if (AutocastOp ac{AutocastList::F32})
    return batch_norm(ac(input), running_mean, running_var, ac(weight), ac(bias), training, momentum, eps);
  need_float("batch_norm", "input", input);
  if (input.dim() < 2)
    fail("batch_norm", "input must have at least 2 dims (N, C, ...), got shape " + shape_str(input.shape()));
  int64_t c = input.size(1);
  Shape cs{c};
  bool have_rm = running_mean && running_mean->defined(), have_rv = running_var && running_var->defined();
  if (have_rm && running_mean->shape() != cs)
    fail("batch_norm",
         "running_mean must have shape " + shape_str(cs) + ", got " + shape_str(running_mean->shape()));
  if (have_rv && running_var->shape() != cs)
    fail("batch_norm",
         "running_var must have shape " + shape_str(cs) + ", got " + shape_str(running_var->shape()));
  check_param("batch_norm", "weight", weight, cs);
  check_param("batch_norm", "bias", bias, cs);
  std::vector<int64_t> dims{0};
  int64_t count = input.size(0);
  for (int64_t i = 2; i < input.dim(); i++) dims.push_back(i), count *= input.size(i);
  Tensor x = input.to(calc_of(input.dtype()));
  Tensor mean, var;
  if (training) {
    if (count <= 1)
      fail("batch_norm", "expected more than 1 value per channel when training, got input of shape " +
                             shape_str(input.shape()));
    std::tie(mean, var) = moments(x, dims);
    Tensor m = mean.reshape(cs), v = var.reshape(cs);
    if (have_rm)
      *running_mean = (running_mean->to(x.dtype()) * (1 - momentum) + m * momentum).to(running_mean->dtype());
    if (have_rv) {
      Tensor unbiased = v * (static_cast<double>(count) / static_cast<double>(count - 1));
      *running_var =
          (running_var->to(x.dtype()) * (1 - momentum) + unbiased * momentum).to(running_var->dtype());
    }
  } else {
    if (!have_rm || !have_rv)
      fail("batch_norm", "running_mean and running_var must be given in evaluation mode (training=false)");
    mean = per_channel(running_mean->to(x.dtype()), input.dim());
    var = per_channel(running_var->to(x.dtype()), input.dim());
  }
  Tensor y = (x - mean) * (var + eps).rsqrt();
  if (weight && weight->defined()) y = y * per_channel(weight->to(x.dtype()), input.dim());
  if (bias && bias->defined()) y = y + per_channel(bias->to(x.dtype()), input.dim());
  return y.to(input.dtype());
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (AutocastOp ac{AutocastList::F32}) return group_norm(ac(input), num_groups, ac(weight), ac(bias), eps);
  need_float("group_norm", "input", input);
  if (input.dim() < 2)
    fail("group_norm", "input must have at least 2 dims (N, C, ...), got shape " + shape_str(input.shape()));
  int64_t n = input.size(0), c = input.size(1);
  if (num_groups <= 0 || c % num_groups != 0)
    fail("group_norm", "num_groups (" + std::to_string(num_groups) +
                           ") must divide the number of channels (" + std::to_string(c) + ") of input " +
                           shape_str(input.shape()));
  check_param("group_norm", "weight", weight, {c});
  check_param("group_norm", "bias", bias, {c});
  Tensor x = input.to(calc_of(input.dtype()));
  int64_t rest = c / num_groups;
  for (int64_t i = 2; i < input.dim(); i++) rest *= input.size(i);
  Tensor g = x.reshape({n, num_groups, rest});
  auto [mean, var] = moments(g, {2});
  Tensor y = ((g - mean) * (var + eps).rsqrt()).reshape(input.shape());
  if (weight && weight->defined()) y = y * per_channel(weight->to(x.dtype()), input.dim());
  if (bias && bias->defined()) y = y + per_channel(bias->to(x.dtype()), input.dim());
  return y.to(input.dtype());
}

Tensor dropout(const Tensor& input, double p, bool training) {
  if (!(p >= 0 && p <= 1)) fail("dropout", "p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0) return input;
  need_float("dropout", "input", input);
  if (p == 1) return input * 0.0;
  Tensor keep = rand(input.shape(), default_generator()) >= p;
  return where(keep, input * (1.0 / (1.0 - p)), 0.0).to(input.dtype());
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (!is_int(indices.dtype()))
    fail("embedding", "indices must be an integer tensor, got " + to_string(indices.dtype()) + " of shape " +
                          shape_str(indices.shape()));
  if (weight.dim() != 2)
    fail("embedding", "weight must be 2-D (num_embeddings, dim), got " + shape_str(weight.shape()));
  int64_t v = weight.size(0);
  Tensor idx = indices.to(DType::I64);
  frontend::require(((idx >= Scalar(0)) & (idx < Scalar(static_cast<long long>(v)))).all(),
                    "embedding: an index is out of range: indices " + shape_str(indices.shape()) + " " +
                        to_string(indices.dtype()) + " on " + indices.device().str() + " must lie in [0, " +
                        std::to_string(v) + ") for a weight of shape " + shape_str(weight.shape()));
  // one-hot selection over the vocabulary: (..., V, 1) mask picks rows of the (V, D) weight
  Tensor hit = idx.unsqueeze(-1) == arange(v);
  return where(hit.unsqueeze(-1), weight, Scalar(0)).sum(-2).to(weight.dtype());
}

}  // namespace kiln::nn::functional
