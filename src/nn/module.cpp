// nn::Module: registration, recursive traversal, train/eval, dtype casts, state dicts and
// functional parameter replacement.
#include "kiln/nn/module.h"

#include <algorithm>

#include "nn/util.h"

namespace kiln::nn {

void module_error(const std::string& module, const std::string& msg) {
  throw Error("kiln.nn." + module + ": " + msg);
}

void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    module_error("Module", "name \"" + name + "\" must be non-empty and contain no '.'");
  auto taken = [&](const auto& v) {
    return std::any_of(v.begin(), v.end(), [&](const auto& e) {
      if constexpr (std::is_same_v<std::decay_t<decltype(e)>, Entry>)
        return e.name == name;
      else
        return e.first == name;
    });
  };
  if (taken(params_) || taken(buffers_) || taken(children_))
    module_error("Module", "\"" + name + "\" is already registered");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name);
  if (t.defined()) {
    if (!is_float(t.dtype()))
      module_error("Module",
                   "parameter \"" + name + "\" must be a float tensor, got " + to_string(t.dtype()));
    t = detail::fresh(t);  // a buffer of its own (see detail::fresh)
    if (requires_grad) t.requires_grad_();
  }
  params_.push_back({name, std::make_unique<Tensor>(std::move(t))});
  return *params_.back().t;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name);
  if (t.defined()) t.realize();
  buffers_.push_back({name, std::make_unique<Tensor>(std::move(t))});
  return *buffers_.back().t;
}

std::shared_ptr<Module> Module::register_module(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name);
  if (!m) module_error("Module", "submodule \"" + name + "\" is empty");
  children_.emplace_back(name, m);
  return m;
}

void Module::collect(const std::string& prefix, bool buffers, bool recurse,
                     std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (auto& e : buffers ? buffers_ : params_)
    if (e.t->defined()) out.emplace_back(prefix + e.name, e.t.get());
  if (recurse)
    for (auto& [n, c] : children_) c->collect(prefix + n + ".", buffers, true, out);
}

namespace {
NamedTensors values(const std::vector<std::pair<std::string, Tensor*>>& v) {
  NamedTensors out;
  for (auto& [n, t] : v) out.emplace_back(n, *t);
  return out;
}
std::vector<Tensor> only_tensors(const NamedTensors& v) {
  std::vector<Tensor> out;
  for (auto& [n, t] : v) out.push_back(t);
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor*>> v;
  collect("", false, recurse, v);
  return values(v);
}
std::vector<Tensor> Module::parameters(bool recurse) const { return only_tensors(named_parameters(recurse)); }
NamedTensors Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor*>> v;
  collect("", true, recurse, v);
  return values(v);
}
std::vector<Tensor> Module::buffers(bool recurse) const { return only_tensors(named_buffers(recurse)); }
std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}
std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}
int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::to(DType t) {
  if (!is_float(t)) module_error("Module", "to(" + to_string(t) + "): only float dtypes are supported");
  std::vector<std::pair<std::string, Tensor*>> ps, bs;
  collect("", false, true, ps);
  collect("", true, true, bs);
  std::vector<Tensor> todo;
  for (auto& [n, p] : ps) {
    if (p->dtype() == t) continue;
    bool rg = p->requires_grad();
    Tensor v = detail::fresh(p->detach().to(t));
    if (rg) v.requires_grad_();
    *p = v;
  }
  for (auto& [n, b] : bs)
    if (is_float(b->dtype()) && b->dtype() != t) *b = b->to(t).contiguous(), todo.push_back(*b);
  realize(todo);
}

void Module::zero_grad() {
  std::vector<std::pair<std::string, Tensor*>> ps;
  collect("", false, true, ps);
  for (auto& [n, p] : ps) p->zero_grad();
}

StateDict Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor*>> v;
  collect("", false, true, v);
  collect("", true, true, v);
  StateDict d;
  for (auto& [n, t] : v) d.emplace(n, t->detach());
  return d;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> v;
  collect("", false, true, v);
  collect("", true, true, v);
  std::vector<std::string> missing, unexpected, mismatched;
  std::map<std::string, Tensor*> mine;
  for (auto& [n, t] : v) mine.emplace(n, t);
  for (auto& [n, t] : mine) {
    auto it = dict.find(n);
    if (it == dict.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& src = it->second;
    if (!src.defined())
      mismatched.push_back("undefined tensor for " + n);
    else if (src.shape() != t->shape())
      mismatched.push_back("shape mismatch for " + n + ": expected " + shape_str(t->shape()) + ", got " +
                           shape_str(src.shape()));
    else if (src.dtype() != t->dtype())
      mismatched.push_back("dtype mismatch for " + n + ": expected " + to_string(t->dtype()) + ", got " +
                           to_string(src.dtype()));
  }
  for (auto& [n, t] : dict)
    if (!mine.count(n)) unexpected.push_back(n);
  std::string msg;
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    msg += msg.empty() ? "" : "; ";
    msg += what;
    for (size_t i = 0; i < names.size(); i++) msg += (i ? ", " : "") + names[i];
  };
  if (strict) {
    list("missing keys: ", missing);
    list("unexpected keys: ", unexpected);
  }
  list("", mismatched);
  if (!msg.empty()) module_error("Module", "load_state_dict: " + msg);
  std::vector<Tensor> done;
  for (auto& [n, t] : mine) {
    auto it = dict.find(n);
    if (it == dict.end()) continue;
    t->assign_(detail::fresh(it->second));
    done.push_back(*t);
  }
  realize(done);
}

Tensor* Module::find_slot(const std::string& dotted, bool buffer) {
  auto dot = dotted.find('.');
  if (dot == std::string::npos) {
    for (auto& e : buffer ? buffers_ : params_)
      if (e.name == dotted && e.t->defined()) return e.t.get();
    return nullptr;
  }
  std::string head = dotted.substr(0, dot);
  for (auto& [n, c] : children_)
    if (n == head) return c->find_slot(dotted.substr(dot + 1), buffer);
  return nullptr;
}

void Module::set_parameter(const std::string& dotted_name, const Tensor& value) {
  Tensor* slot = find_slot(dotted_name, false);
  if (!slot) module_error("Module", "set_parameter: no parameter named \"" + dotted_name + "\"");
  if (!value.defined() || value.shape() != slot->shape())
    module_error("Module", "set_parameter: " + dotted_name + " expects shape " + shape_str(slot->shape()) +
                               ", got " +
                               (value.defined() ? shape_str(value.shape()) : "an undefined tensor"));
  *slot = value;
}

}  // namespace kiln::nn
