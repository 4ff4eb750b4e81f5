// optim::Adam and optim::AdamW: torch.optim.Adam (L2 weight decay) and AdamW (decoupled), amsgrad.
#include <cmath>

#include "kiln/optim.h"

namespace kiln::optim {

namespace {
// b^n by repeated multiplication: the same rounding as the powers advanced on the device
double power(double b, int64_t n) {
  double p = 1;
  for (int64_t i = 0; i < n; i++) p *= b;
  return p;
}

template <class O>
std::vector<ParamGroup<AdamOptions>> as_adam(std::vector<ParamGroup<O>> groups) {
  std::vector<ParamGroup<AdamOptions>> out;
  for (auto& g : groups) {
    const O& o = g.options;
    out.push_back({std::move(g.params), AdamOptions{.lr = o.lr,
                                                    .betas = o.betas,
                                                    .eps = o.eps,
                                                    .weight_decay = o.weight_decay,
                                                    .amsgrad = o.amsgrad,
                                                    .maximize = o.maximize}});
  }
  return out;
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions o)
    : Adam("Adam", std::vector<ParamGroup<AdamOptions>>{{std::move(params), o}}, false) {}
Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam("Adam", std::move(groups), false) {}

Adam::Adam(std::string name, std::vector<ParamGroup<AdamOptions>> groups, bool decoupled)
    : Optimizer(std::move(name),
                [&] {
                  std::vector<Group> gs;
                  for (auto& g : groups) gs.push_back({g.params, g.options.lr});
                  return gs;
                }()),
      decoupled_(decoupled) {
  for (auto& g : groups) {
    const AdamOptions& o = g.options;
    check(o.eps >= 0, "epsilon value", o.eps);
    check(o.betas[0] >= 0 && o.betas[0] < 1, "beta parameter at index 0", o.betas[0]);
    check(o.betas[1] >= 0 && o.betas[1] < 1, "beta parameter at index 1", o.betas[1]);
    check(o.weight_decay >= 0, "weight_decay value", o.weight_decay);
    opts_.push_back(o);
    double one = 1;
    Device dev = g.params.empty() ? default_device() : g.params[0].device();
    powers_.push_back({on_device(from_buffer(&one, {}, DType::F64), dev),
                       on_device(from_buffer(&one, {}, DType::F64), dev),
                       {},
                       {},
                       0,
                       -1});
  }
  zero_initial_state();  // the moments start as zeros in buffers: the first step is like the others
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : Adam("AdamW", as_adam(std::vector<ParamGroup<AdamWOptions>>{{std::move(params), o}}), true) {}
AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups)
    : Adam("AdamW", as_adam(std::move(groups)), true) {}

std::vector<std::string> Adam::state_names(size_t g) const {
  if (opts_[g].amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::replayed(size_t g) {  // as update() does at the group's first parameter of a step
  Powers& pw = powers_[g];
  pw.last_step = steps_taken();
  pw.steps++;
}

void Adam::update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) {
  const AdamOptions& o = opts_[g];
  const double lr = groups_[g].lr, b1 = o.betas[0], b2 = o.betas[1];
  const DType t = p.dtype();
  Tensor d = o.maximize ? -grad : grad;
  Tensor base = p;
  if (decoupled_) {
    if (o.weight_decay != 0) base = p * (1.0 - lr_tensor(g) * o.weight_decay).to(t);
  } else if (o.weight_decay != 0) {
    d = d + p * o.weight_decay;
  }
  bool first = !s.tensors.count("exp_avg");
  Tensor m = first ? d * (1 - b1) : s.tensors["exp_avg"] * b1 + d * (1 - b1);
  Tensor v = first ? d * d * (1 - b2) : s.tensors["exp_avg_sq"] * b2 + d * d * (1 - b2);
  u.set(s, "exp_avg", m);
  u.set(s, "exp_avg_sq", v);
  Powers& pw = powers_[g];
  if (pw.last_step != steps_taken()) {  // the group's first parameter in this step
    pw.last_step = steps_taken();
    if (pw.steps != s.step - 1) {  // after load_state_dict: start from this parameter's count
      double p1 = power(b1, s.step - 1), p2 = power(b2, s.step - 1);
      pw.beta1 = on_device(from_buffer(&p1, {}, DType::F64), p.device());
      pw.beta2 = on_device(from_buffer(&p2, {}, DType::F64), p.device());
      pw.steps = s.step - 1;
    }
    pw.steps++;
    pw.next1 = pw.beta1 * b1;
    pw.next2 = pw.beta2 * b2;
    u.set(pw.beta1, pw.next1);
    u.set(pw.beta2, pw.next2);
  }
  Tensor step_size, bc2_sqrt;
  if (s.step == pw.steps) {  // computed in f64 from buffers, rounded to t once, as on the host
    step_size = (lr_tensor(g) / (1.0 - pw.next1)).to(t);
    bc2_sqrt = (1.0 - pw.next2).sqrt().to(t);
  } else {  // a parameter that skipped steps has its own count
    step_size = u.scalar(lr / (1 - power(b1, s.step)), t, p.device());
    bc2_sqrt = u.scalar(std::sqrt(1 - power(b2, s.step)), t, p.device());
  }
  Tensor vhat = v;
  if (o.amsgrad) {
    // a buffer of its own from the first step, so that every later step has the same graph
    vhat = first ? v.contiguous() : maximum(s.tensors["max_exp_avg_sq"], v);
    u.set(s, "max_exp_avg_sq", vhat);
  }
  Tensor denom = vhat.sqrt() / bc2_sqrt + o.eps;
  u.set(p, base - step_size * (m / denom));
}

}  // namespace kiln::optim
