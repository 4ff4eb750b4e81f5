// Normalization layers: LayerNorm, RMSNorm, GroupNorm and BatchNorm1d/2d (weights ones, biases
// zeros; batch norm keeps running_mean/running_var buffers).
#pragma once
#include <optional>

#include "kiln/nn/module.h"

namespace kiln::nn {

// Normalizes over the trailing dims `normalized_shape`.
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                         bool bias = true);
  Tensor forward(const Tensor& x) const;
  Shape normalized_shape;
  double eps;
  Tensor& weight;  // undefined without elementwise_affine
  Tensor& bias;    // undefined without elementwise_affine or bias
};
KILN_MODULE(LayerNorm);

// eps: none = the dtype's machine epsilon (as torch)
class RMSNormImpl : public Module {
 public:
  explicit RMSNormImpl(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                       bool elementwise_affine = true);
  Tensor forward(const Tensor& x) const;
  Shape normalized_shape;
  std::optional<double> eps;
  Tensor& weight;
};
KILN_MODULE(RMSNorm);

// input (N, C, ...), C = num_channels divisible by num_groups
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) const;
  int64_t num_groups, num_channels;
  double eps;
  Tensor& weight;
  Tensor& bias;
};
KILN_MODULE(GroupNorm);

// Training mode normalizes with batch statistics and updates the running buffers (momentum as in
// PyTorch, unbiased running variance); eval mode uses the buffers. The updated buffers are lazy:
// realize them with the parameters each step (e.g. realize(model->buffers())).
class BatchNormImpl : public Module {
 public:
  Tensor forward(const Tensor& x);
  int64_t num_features;
  double eps, momentum;
  bool track_running_stats;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;  // undefined without track_running_stats
  Tensor& running_var;

 protected:
  BatchNormImpl(const char* name, std::vector<int64_t> ranks, int64_t num_features, double eps,
                double momentum, bool affine, bool track_running_stats);

 private:
  const char* name_;
  std::vector<int64_t> ranks_;  // accepted input ranks
};

// input (N, C) or (N, C, L)
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNormImpl("BatchNorm1d", {2, 3}, num_features, eps, momentum, affine, track_running_stats) {}
};
KILN_MODULE(BatchNorm1d);

// input (N, C, H, W)
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNormImpl("BatchNorm2d", {4}, num_features, eps, momentum, affine, track_running_stats) {}
};
KILN_MODULE(BatchNorm2d);

}  // namespace kiln::nn
