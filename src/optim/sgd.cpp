// optim::SGD: torch.optim.SGD (momentum, dampening, L2 weight decay, Nesterov, maximize).
#include "kiln/optim.h"

namespace kiln::optim {

namespace {
std::vector<ParamGroup<SGDOptions>> one_group(std::vector<Tensor> params, SGDOptions o) {
  return {{std::move(params), o}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : SGD(one_group(std::move(params), o)) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups)
    : Optimizer("SGD", [&] {
        std::vector<Group> gs;
        for (auto& g : groups) gs.push_back({g.params, g.options.lr});
        return gs;
      }()) {
  for (auto& g : groups) {
    const SGDOptions& o = g.options;
    check(o.momentum >= 0, "momentum value", o.momentum);
    check(o.weight_decay >= 0, "weight_decay value", o.weight_decay);
    if (o.nesterov && o.momentum <= 0)
      throw Error("kiln: optim::SGD: Nesterov momentum requires a momentum > 0, got momentum " +
                  std::to_string(o.momentum));
    if (o.nesterov && o.dampening != 0)
      throw Error("kiln: optim::SGD: Nesterov momentum requires zero dampening, got dampening " +
                  std::to_string(o.dampening));
    opts_.push_back(o);
  }
}

std::vector<std::string> SGD::state_names(size_t g) const {
  if (opts_[g].momentum != 0) return {"momentum_buffer"};
  return {};
}

void SGD::update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) {
  const SGDOptions& o = opts_[g];
  Tensor d = o.maximize ? -grad : grad;
  if (o.weight_decay != 0) d = d + p * o.weight_decay;
  if (o.momentum != 0) {
    auto it = s.tensors.find("momentum_buffer");
    Tensor buf = it == s.tensors.end() ? d : it->second * o.momentum + d * (1 - o.dampening);
    u.set(s, "momentum_buffer", buf);
    d = o.nesterov ? d + buf * o.momentum : buf;
  }
  u.set(p, p - lr_tensor(g).to(p.dtype()) * d);
}

}  // namespace kiln::optim
