// kiln::nn::functional (alias kiln::F): convolution, pooling, normalization, dropout, embedding,
// attention and losses, written from tensor primitives (so they fuse and get gradients from autograd).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::nn::functional {

// input (..., in) @ weight (out, in)^T + bias (out) (src/frontend/reduce.cpp)
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

// --- convolution and pooling (src/frontend/conv.cpp): one pooling construction for all ---
// input (N, C_in, L...) ; weight (C_out, C_in / groups, K...) ; per-dim stride/padding/dilation
// given as one value for all dims or one per dim.
Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
// weight (C_in, C_out / groups, K...)
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias = std::nullopt, std::vector<int64_t> stride = {1},
                        std::vector<int64_t> padding = {0}, std::vector<int64_t> output_padding = {0},
                        int64_t groups = 1, std::vector<int64_t> dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias = std::nullopt, std::vector<int64_t> stride = {1},
                        std::vector<int64_t> padding = {0}, std::vector<int64_t> output_padding = {0},
                        int64_t groups = 1, std::vector<int64_t> dilation = {1});
// stride defaults to kernel_size (empty = kernel_size)
Tensor max_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1});
Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1});
Tensor avg_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<int64_t> output_size);
// mode "nearest" or "bilinear" (align_corners as in PyTorch); give size or scale_factor
Tensor interpolate(const Tensor& input, std::vector<int64_t> size, const std::string& mode = "nearest",
                   bool align_corners = false);
Tensor interpolate(const Tensor& input, double scale_factor, const std::string& mode = "nearest",
                   bool align_corners = false);

// --- normalization and regularization (src/frontend/norm.cpp) ---
Tensor layer_norm(const Tensor& input, Shape normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
Tensor rms_norm(const Tensor& input, Shape normalized_shape,
                const std::optional<Tensor>& weight = std::nullopt, std::optional<double> eps = std::nullopt);
// training: normalizes with batch statistics and updates running_mean/running_var in place
// (momentum as in PyTorch, unbiased running variance); eval: uses the running statistics.
Tensor batch_norm(const Tensor& input, Tensor* running_mean, Tensor* running_var,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
Tensor embedding(const Tensor& indices, const Tensor& weight);

// --- losses (src/frontend/loss.cpp); reduction: "mean", "sum" or "none" ---
// target: class indices (integer, shape (N) or (N, d...)) or probabilities (float, input's shape)
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const std::optional<Tensor>& weight = std::nullopt, int64_t ignore_index = -100,
                     const std::string& reduction = "mean", double label_smoothing = 0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                int64_t ignore_index = -100, const std::string& reduction = "mean");
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1);
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1);
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const std::optional<Tensor>& weight = std::nullopt,
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = std::nullopt,
                                        const std::string& reduction = "mean",
                                        const std::optional<Tensor>& pos_weight = std::nullopt);
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);

// --- attention (src/frontend/attention.cpp) ---
struct AttentionOptions {
  std::optional<Tensor> attn_mask = std::nullopt;  // bool (true: the key takes part) or float (added)
  double dropout_p = 0.0;                          // applied to the attention weights whenever above 0
  bool is_causal = false;                          // query i sees keys 0..i (top-left aligned, as tril)
  std::optional<double> scale = std::nullopt;      // of the scores; default 1 / sqrt(D)
};
// softmax(query key^T * scale [+ mask]) value, as PyTorch's: query (..., Tq, D), key (..., Tk, D),
// value (..., Tk, Dv) -> (..., Tq, Dv); batch dims broadcast. Where the flash-attention kernel runs
// (CUDA, sm_80 or newer, f16/bf16, D == Dv in {64, 128}, no mask, no dropout) it is one op of the
// graph and one kernel; elsewhere it is matmuls around a softmax, which fuse and differentiate as
// any other ops.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options = {});

}  // namespace kiln::nn::functional

namespace kiln {
namespace F = nn::functional;
}
