// Containers: Sequential (a chain of Tensor -> Tensor modules), ModuleList (indexed submodules)
// and Functional (a Tensor -> Tensor function as a module, e.g. a lambda in a Sequential).
#pragma once
#include <functional>

#include "kiln/nn/module.h"

namespace kiln::nn {

class FunctionalImpl : public Module {
 public:
  explicit FunctionalImpl(std::function<Tensor(const Tensor&)> f) : f_(std::move(f)) {}
  Tensor forward(const Tensor& x) const { return f_(x); }

 private:
  std::function<Tensor(const Tensor&)> f_;
};
KILN_MODULE(Functional);

// Children are named "0", "1", ... in order.
class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  template <class... Ms>
  requires(sizeof...(Ms) > 0 && (is_module_holder_v<Ms> && ...)) explicit SequentialImpl(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
  // a module holder whose forward takes one Tensor and returns a Tensor
  template <class H>
  requires is_module_holder_v<H>
  void push_back(H&& m) {
    auto p = m.ptr();
    register_module(std::to_string(fns_.size()), std::static_pointer_cast<Module>(p));
    fns_.push_back([p](const Tensor& x) -> Tensor { return p->forward(x); });
  }
  void push_back(std::function<Tensor(const Tensor&)> f) { push_back(Functional(std::move(f))); }
  Tensor forward(const Tensor& x) const;
  size_t size() const { return fns_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class Impl>
  std::shared_ptr<Impl> at(size_t i) const {
    return std::dynamic_pointer_cast<Impl>((*this)[i]);
  }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> fns_;
};
KILN_MODULE(Sequential);

// Children are named "0", "1", ...; the owner calls them.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  template <class... Ms>
  requires(sizeof...(Ms) > 0 && (is_module_holder_v<Ms> && ...)) explicit ModuleListImpl(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
  template <class H>
  requires is_module_holder_v<H>
  void push_back(H&& m) { push_back(std::static_pointer_cast<Module>(m.ptr())); }
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return mods_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class Impl>
  std::shared_ptr<Impl> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<Impl>((*this)[i]);
    if (!p) module_error("ModuleList", "element " + std::to_string(i) + " is not of the requested type");
    return p;
  }
  auto begin() const { return mods_.begin(); }
  auto end() const { return mods_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> mods_;
};
KILN_MODULE(ModuleList);

}  // namespace kiln::nn
