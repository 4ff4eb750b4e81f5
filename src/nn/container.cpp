// Sequential and ModuleList: calling and indexing.
#include "kiln/nn/container.h"

namespace kiln::nn {

Tensor SequentialImpl::forward(const Tensor& x) const {
  Tensor h = x;
  for (auto& f : fns_) h = f(h);
  return h;
}

std::shared_ptr<Module> SequentialImpl::operator[](size_t i) const {
  auto kids = children();
  if (i >= kids.size())
    module_error("Sequential", "index " + std::to_string(i) + " out of range for " +
                                   std::to_string(kids.size()) + " modules");
  return kids[i];
}

void ModuleListImpl::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(mods_.size()), m);
  mods_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t i) const {
  if (i >= mods_.size())
    module_error("ModuleList", "index " + std::to_string(i) + " out of range for " +
                                   std::to_string(mods_.size()) + " modules");
  return mods_[i];
}

}  // namespace kiln::nn
