// optim::Adagrad: torch.optim.Adagrad (lr_decay, L2 weight decay, initial accumulator, eps).
#include "kiln/optim.h"

namespace kiln::optim {

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions o)
    : Adagrad(std::vector<ParamGroup<AdagradOptions>>{{std::move(params), o}}) {}

Adagrad::Adagrad(std::vector<ParamGroup<AdagradOptions>> groups)
    : Optimizer("Adagrad", [&] {
        std::vector<Group> gs;
        for (auto& g : groups) gs.push_back({g.params, g.options.lr});
        return gs;
      }()) {
  for (auto& g : groups) {
    const AdagradOptions& o = g.options;
    check(o.lr_decay >= 0, "lr_decay value", o.lr_decay);
    check(o.weight_decay >= 0, "weight_decay value", o.weight_decay);
    check(o.initial_accumulator_value >= 0, "initial_accumulator_value value", o.initial_accumulator_value);
    check(o.eps >= 0, "epsilon value", o.eps);
    opts_.push_back(o);
  }
}

std::vector<std::string> Adagrad::state_names(size_t) const { return {"sum"}; }

void Adagrad::update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) {
  const AdagradOptions& o = opts_[g];
  Tensor d = o.maximize ? -grad : grad;
  if (o.weight_decay != 0) d = d + p * o.weight_decay;
  auto it = s.tensors.find("sum");
  Tensor sum = it == s.tensors.end() ? d * d + o.initial_accumulator_value : it->second + d * d;
  u.set(s, "sum", sum);
  double clr = groups_[g].lr / (1 + static_cast<double>(s.step - 1) * o.lr_decay);
  // without decay the rate is the group's lr tensor (set_lr reaches captured steps); with decay it
  // depends on the step count and is made on the host
  Tensor lr = o.lr_decay == 0 ? lr_tensor(g).to(p.dtype()) : u.scalar(clr, p.dtype(), p.device());
  u.set(p, p - lr * (d / (sum.sqrt() + o.eps)));
}

}  // namespace kiln::optim
