// optim::Optimizer: parameter groups, per-parameter state, the one-realize step, state_dict.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "frontend/tensor_impl.h"
#include "ir/node.h"
#include "kiln/jit.h"
#include "kiln/optim.h"
#include "runtime/buffer.h"

namespace kiln::optim {

namespace {
std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}
Tensor i64_scalar(int64_t v) { return from_buffer(&v, {}, DType::I64); }
Tensor snapshot(const Tensor& t) { return Tensor(t.node()); }  // a new handle: later assign_ do not reach it
}  // namespace

Tensor Optimizer::on_device(const Tensor& t, Device d) { return t.device() == d ? t : t.to(d).realize(); }

Optimizer::Optimizer(std::string name, std::vector<Group> groups)
    : groups_(std::move(groups)), name_(std::move(name)) {
  size_t n = 0;
  for (size_t g = 0; g < groups_.size(); g++) {
    for (auto& p : groups_[g].params) {
      if (!p.defined())
        throw Error("kiln: optim::" + name_ + ": group " + std::to_string(g) + " has an undefined parameter");
      if (!is_float(p.dtype()))
        throw Error("kiln: optim::" + name_ + ": parameters must be floating point, got " +
                    to_string(p.dtype()));
    }
    check(groups_[g].lr >= 0, "learning rate", groups_[g].lr);
    n += groups_[g].params.size();
    Device dev = groups_[g].params.empty() ? default_device() : groups_[g].params[0].device();
    lr_tensors_.push_back(on_device(from_buffer(&groups_[g].lr, {}, DType::F64), dev));
  }
  state_.resize(n);
}

void Optimizer::check(bool ok, const std::string& what, double value) const {
  if (!ok) throw Error("kiln: optim::" + name_ + ": invalid " + what + ": " + num(value));
}

Tensor Optimizer::Update::scalar(double v, DType t, Device dev) {
  std::tuple<double, DType, int> key{v, t, dev.code()};
  auto it = scalars.find(key);
  if (it != scalars.end()) return it->second;
  if (t == DType::F32) {
    float f = static_cast<float>(v);
    return scalars[key] = on_device(from_buffer(&f, {}, DType::F32), dev);
  }
  Tensor d = on_device(from_buffer(&v, {}, DType::F64), dev);
  return scalars[key] = t == DType::F64 ? d : d.to(t);
}

void Optimizer::Update::set(ParamState& s, const std::string& name, const Tensor& value) {
  auto it = s.tensors.find(name);
  Tensor target = it != s.tensors.end() ? it->second : (s.tensors[name] = Tensor(value.node()));
  assigns.emplace_back(target, value);
}

void Optimizer::step() {
  NoGradGuard no_grad;
  Update u;
  std::vector<Tensor> grads;
  std::vector<size_t> stepped, stepped_groups;  // parameters and groups this step updates
  size_t i = 0;
  for (size_t g = 0; g < groups_.size(); g++) {
    for (auto& p : groups_[g].params) {
      ParamState& s = state_[i++];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      s.step++;
      update(g, p, grad, s, u);
      grads.push_back(grad);
      stepped.push_back(i - 1);
      if (stepped_groups.empty() || stepped_groups.back() != g) stepped_groups.push_back(g);
    }
  }
  // a captured step replays the kernels only: the counts advance with it
  on_jit_replay([this, stepped, stepped_groups] {
    for (size_t g : stepped_groups) replayed(g);
    for (size_t k : stepped) state_[k].step++;
    steps_++;
  });
  steps_++;
  if (u.assigns.empty()) return;
  std::vector<Tensor> outs;
  for (auto& [target, value] : u.assigns) {
    target.assign_(value);
    outs.push_back(target);
  }
  // the gradients are computed by this schedule anyway; storing them keeps grad() cheap to read,
  // and the losses they came from need only the last kernels of the forward this schedule computes
  for (auto& g : grads) outs.push_back(g);
  for (auto& loss : autograd::take_backward_roots()) outs.push_back(loss);
  realize(outs);
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params) p.zero_grad();
}

const std::vector<Tensor>& Optimizer::params(size_t group) const { return groups_.at(group).params; }

std::vector<Tensor> Optimizer::all_params() const {
  std::vector<Tensor> all;
  for (auto& g : groups_) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}

double Optimizer::lr(size_t group) const { return groups_.at(group).lr; }
void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); g++) set_lr(g, lr);
}
void Optimizer::set_lr(size_t group, double lr) {
  check(lr >= 0, "learning rate", lr);
  groups_.at(group).lr = lr;
  // in place: graphs (and captured steps) that read the rate see the new one
  upload(*lr_tensors_.at(group).node()->buffer, &lr);
}
int64_t Optimizer::step_count(size_t param_index) const { return state_.at(param_index).step; }

void Optimizer::zero_initial_state() {
  zero_initial_ = true;
  // buffers of their own, filled on the parameters' devices (zeros_like alone would be a constant,
  // folded into the step)
  std::vector<std::pair<Tensor*, Tensor>> made;
  size_t i = 0;
  for (size_t g = 0; g < groups_.size(); g++)
    for (auto& p : groups_[g].params) {
      ParamState& s = state_[i++];
      if (s.step != 0) continue;
      for (auto& name : state_names(g))
        if (!s.tensors.count(name))
          made.emplace_back(&s.tensors[name], zeros(p.shape(), {.dtype = p.dtype(), .device = p.device()}));
    }
  std::vector<Tensor> values;
  for (auto& [t, z] : made) values.push_back(z.contiguous());
  realize(values);  // each shape's zeros once, in one schedule
  for (size_t k = 0; k < made.size(); k++) *made[k].first = frontend::own_copy(values[k]);
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> sd;
  std::vector<Tensor> pending;
  for (auto& s : state_)
    for (auto& [name, t] : s.tensors) pending.push_back(t);
  realize(pending);
  for (size_t i = 0; i < state_.size(); i++) {
    std::string key = "state." + std::to_string(i) + ".";
    sd[key + "step"] = i64_scalar(state_[i].step);
    if (state_[i].step > 0)
      for (auto& [name, t] : state_[i].tensors) sd[key + name] = snapshot(t);
  }
  for (size_t g = 0; g < groups_.size(); g++) {
    double lr = groups_[g].lr;
    sd["group." + std::to_string(g) + ".lr"] = from_buffer(&lr, {}, DType::F64);
  }
  sd["step"] = i64_scalar(steps_);
  return sd;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& sd) {
  auto get = [&](const std::string& key) -> const Tensor& {
    auto it = sd.find(key);
    if (it == sd.end())
      throw Error("kiln: optim::" + name_ + ": load_state_dict: missing key \"" + key + "\"");
    return it->second;
  };
  auto scalar_value = [&](const std::string& key) {
    const Tensor& t = get(key);
    if (t.numel() != 1)
      throw Error("kiln: optim::" + name_ + ": load_state_dict: \"" + key +
                  "\" must have one element, got shape " + shape_str(t.shape()));
    return t.item<double>();
  };
  // validate everything before changing anything
  std::vector<ParamState> state(state_.size());
  std::vector<double> lrs(groups_.size());
  size_t i = 0;
  for (size_t g = 0; g < groups_.size(); g++) {
    lrs[g] = scalar_value("group." + std::to_string(g) + ".lr");
    for (auto& p : groups_[g].params) {
      std::string key = "state." + std::to_string(i) + ".";
      double step = scalar_value(key + "step");
      if (step < 0 || step != std::floor(step))
        throw Error("kiln: optim::" + name_ + ": load_state_dict: \"" + key + "step\" must be a count, got " +
                    num(step));
      state[i].step = static_cast<int64_t>(step);
      if (state[i].step > 0) {
        for (auto& name : state_names(g)) {
          const Tensor& t = get(key + name);
          if (t.shape() != p.shape())
            throw Error("kiln: optim::" + name_ + ": load_state_dict: \"" + key + name + "\" has shape " +
                        shape_str(t.shape()) + ", the parameter has shape " + shape_str(p.shape()));
          state[i].tensors[name] = snapshot(t.to(p.dtype()).contiguous());
        }
      }
      i++;
    }
  }
  if (sd.size() != 0 && !sd.count("step")) get("step");
  for (auto& [key, t] : sd)
    if (key.rfind("state.", 0) == 0) {
      size_t idx = std::stoul(key.substr(6));
      if (idx >= state_.size())
        throw Error("kiln: optim::" + name_ + ": load_state_dict: \"" + key + "\" names parameter " +
                    std::to_string(idx) + ", this optimizer has " + std::to_string(state_.size()));
    }
  std::vector<Tensor> pending;
  for (auto& s : state)
    for (auto& [name, t] : s.tensors) pending.push_back(t);
  realize(pending);
  state_ = std::move(state);
  for (size_t g = 0; g < groups_.size(); g++) set_lr(g, lrs[g]);
  steps_ = static_cast<int64_t>(scalar_value("step"));
  if (zero_initial_) zero_initial_state();
}

}  // namespace kiln::optim
