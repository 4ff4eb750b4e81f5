// optim::RMSprop: torch.optim.RMSprop (alpha, eps, L2 weight decay, momentum, centered, maximize).
#include "kiln/optim.h"

namespace kiln::optim {

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions o)
    : RMSprop(std::vector<ParamGroup<RMSpropOptions>>{{std::move(params), o}}) {}

RMSprop::RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups)
    : Optimizer("RMSprop", [&] {
        std::vector<Group> gs;
        for (auto& g : groups) gs.push_back({g.params, g.options.lr});
        return gs;
      }()) {
  for (auto& g : groups) {
    const RMSpropOptions& o = g.options;
    check(o.eps >= 0, "epsilon value", o.eps);
    check(o.momentum >= 0, "momentum value", o.momentum);
    check(o.weight_decay >= 0, "weight_decay value", o.weight_decay);
    check(o.alpha >= 0, "alpha value", o.alpha);
    opts_.push_back(o);
  }
}

std::vector<std::string> RMSprop::state_names(size_t g) const {
  std::vector<std::string> names = {"square_avg"};
  if (opts_[g].momentum > 0) names.push_back("momentum_buffer");
  if (opts_[g].centered) names.push_back("grad_avg");
  return names;
}

void RMSprop::update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) {
  const RMSpropOptions& o = opts_[g];
  Tensor d = o.maximize ? -grad : grad;
  if (o.weight_decay != 0) d = d + p * o.weight_decay;
  bool first = !s.tensors.count("square_avg");
  Tensor sq = first ? d * d * (1 - o.alpha) : s.tensors["square_avg"] * o.alpha + d * d * (1 - o.alpha);
  u.set(s, "square_avg", sq);
  Tensor avg;
  if (o.centered) {
    Tensor ga = first ? d * (1 - o.alpha) : s.tensors["grad_avg"] * o.alpha + d * (1 - o.alpha);
    u.set(s, "grad_avg", ga);
    avg = (sq - ga * ga).sqrt() + o.eps;
  } else {
    avg = sq.sqrt() + o.eps;
  }
  Tensor lr = lr_tensor(g).to(p.dtype());
  if (o.momentum > 0) {
    Tensor buf = first ? d / avg : s.tensors["momentum_buffer"] * o.momentum + d / avg;
    u.set(s, "momentum_buffer", buf);
    u.set(p, p - lr * buf);
  } else {
    u.set(p, p - lr * (d / avg));
  }
}

}  // namespace kiln::optim
