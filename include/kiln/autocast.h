// kiln::Autocast: mixed precision as torch.autocast. While a scope is alive on this thread, the ops
// that PyTorch runs in lower precision compute in the scope's dtype and those it runs in f32 take
// half inputs in f32; parameters, their gradients and optimizer state stay as they are (f32).
#pragma once
#include <optional>

#include "kiln/dtype.h"

namespace kiln {

// Under Autocast(DType::BF16) (or F16):
//  - matmul, dot, F::linear, conv / conv_transpose, einsum of two or more operands and
//    F::scaled_dot_product_attention cast their f32/f16/bf16 inputs (bias included) to the dtype and
//    return it (products are exact and sums accumulate in f32 inside);
//  - softmax, log_softmax, logsumexp, sum, prod, mean, var, std, norm, cumsum, cumprod, exp, log,
//    log2, log1p, expm1, pow, reciprocal, rsqrt, tan, asin, acos, sinh, cosh, softplus, the norms
//    (layer, rms, group, batch) and the losses cast f16/bf16 inputs to f32 and return f32;
//  - every other op follows the usual type promotion (bf16 + f32 is f32).
// f64 inputs are never cast. The casts are ordinary lazy casts: they fuse into their consumers, and
// their gradients cast back, so a leaf's gradient has the leaf's dtype. Scopes nest; the innermost
// one decides, and Autocast(std::nullopt) turns autocast off inside. Gradients are computed in the
// dtypes the forward chose, whatever scope backward() runs in. There is no gradient scaler: with f16,
// small activation gradients can underflow (bf16 has f32's range).
class Autocast {
 public:
  explicit Autocast(std::optional<DType> dtype);  // F16, BF16 or nullopt (off)
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> prev_;
};

// The innermost scope's dtype on this thread; nullopt where none is on.
std::optional<DType> autocast_dtype();

}  // namespace kiln
