// optim::clip_grad_norm_: total gradient norm and in-place (lazy) scaling, as in PyTorch.
#include <cmath>

#include "kiln/optim.h"

namespace kiln::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  if (!(norm_type > 0))
    throw Error("kiln: optim::clip_grad_norm_: norm_type must be positive (or infinity), got " +
                std::to_string(norm_type));
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  DType t = grads[0].dtype();
  bool inf = std::isinf(norm_type);
  auto vnorm = [&](const Tensor& g) -> Tensor {
    Tensor a = g.to(t).abs();
    if (inf) return a.max();
    if (norm_type == 2) return (a * a).sum().sqrt();
    if (norm_type == 1) return a.sum();
    return a.pow(norm_type).sum().pow(1 / norm_type);
  };
  std::vector<Tensor> norms;
  for (auto& g : grads) norms.push_back(vnorm(g));
  Tensor total = norms.size() == 1 ? norms[0] : vnorm(stack(norms));
  Tensor coef = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (Tensor p : params)  // a handle copy shares the parameter's gradient
    if (p.grad().defined()) p.set_grad(p.grad() * coef.to(p.grad().dtype()));
  return total;
}

}  // namespace kiln::optim
