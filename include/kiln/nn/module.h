// kiln::nn::Module, the base of every layer (parameters, buffers, submodules, train/eval, dtype
// casts, state dicts), and ModuleHolder, the shared_ptr handle that `nn::Linear` and friends are.
#pragma once
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::nn {

// Parameters and buffers by dotted name ("h.0.attn.in_proj.weight"); sorted by name.
using StateDict = std::map<std::string, Tensor>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Throws kiln::Error("kiln.nn.<module>: <msg>").
[[noreturn]] void module_error(const std::string& module, const std::string& msg);

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // --- registration (normally from a subclass constructor) ---
  // Stores t and marks it requires_grad_() (it is realized: parameters are leaves). Returns a
  // reference to the stored handle, stable for the module's lifetime: layers keep it as a member
  // (`Tensor& weight`), so to(), load_state_dict() and set_parameter() are seen through it. An
  // undefined t registers an absent parameter (a Linear without bias): listed nowhere.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  std::shared_ptr<Module> register_module(const std::string& name, std::shared_ptr<Module> m);
  template <class H>
  requires requires(const H& h) { h.ptr(); }
  H register_module(const std::string& name, H holder) {
    register_module(name, std::static_pointer_cast<Module>(holder.ptr()));
    return holder;
  }

  // --- traversal (recursive: "child.grandchild.name", in registration order, parameters of a
  // module before those of its children) ---
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  int64_t num_parameters() const;  // total elements of all parameters

  // --- modes and dtypes ---
  virtual void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Casts every float parameter and float buffer to t (realized). Parameters are re-registered as
  // new leaves (requires_grad kept, gradients dropped).
  void to(DType t);
  void zero_grad();  // drops every parameter's gradient

  // --- state ---
  // Parameters and buffers, detached handles of the current values.
  StateDict state_dict() const;
  // Copies values in with assign_ (parameters stay leaves; handles see the new values) and
  // realizes them. Every mismatch is reported in one kiln::Error: missing keys and unexpected keys
  // (strict only), shape and dtype mismatches (always).
  void load_state_dict(const StateDict& dict, bool strict = true);
  // Replaces a parameter's tensor by `value` as is (no copy, no requires_grad_): a functional call,
  // e.g. to take gradients with respect to given tensors. Shapes must match.
  void set_parameter(const std::string& dotted_name, const Tensor& value);

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<Tensor> t;
  };
  void check_new_name(const std::string& name) const;
  Tensor* find_slot(const std::string& dotted_name, bool buffer);
  void collect(const std::string& prefix, bool buffers, bool recurse,
               std::vector<std::pair<std::string, Tensor*>>& out) const;

  std::vector<Entry> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A shared handle to a module: `nn::Linear fc(784, 512); Tensor y = fc(x); fc->weight;`.
// Copies share the module. `nn::Linear fc{nullptr}` is an empty handle to assign later.
template <class Impl>
class ModuleHolder {
 public:
  using element_type = Impl;
  ModuleHolder() requires std::default_initializable<Impl> : impl_(std::make_shared<Impl>()) {}
  ModuleHolder(std::nullptr_t) {}
  ModuleHolder(std::shared_ptr<Impl> p) : impl_(std::move(p)) {}
  template <class A0, class... As>
  requires((sizeof...(As) > 0 || (!std::is_same_v<std::remove_cvref_t<A0>, ModuleHolder> &&
                                  !std::is_same_v<std::remove_cvref_t<A0>, std::shared_ptr<Impl>> &&
                                  !std::is_same_v<std::remove_cvref_t<A0>, std::nullptr_t>)) &&
           std::constructible_from<Impl, A0, As...>) explicit ModuleHolder(A0&& a0, As&&... as)
      : impl_(std::make_shared<Impl>(std::forward<A0>(a0), std::forward<As>(as)...)) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    if (!impl_) throw Error("kiln.nn: use of an empty module handle");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  explicit operator bool() const { return impl_ != nullptr; }
  // module(args...) calls module->forward(args...)
  template <class... As>
  decltype(auto) operator()(As&&... as) const {
    return get()->forward(std::forward<As>(as)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

template <class T>
struct is_module_holder : std::false_type {};
template <class I>
struct is_module_holder<ModuleHolder<I>> : std::true_type {};
template <class T>
inline constexpr bool is_module_holder_v = is_module_holder<std::remove_cvref_t<T>>::value;

// Declares `using Name = ModuleHolder<NameImpl>`.
#define KILN_MODULE(Name) using Name = ::kiln::nn::ModuleHolder<Name##Impl>

}  // namespace kiln::nn
