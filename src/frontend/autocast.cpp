// kiln::Autocast's thread-local scope, and the casts the ops of its two lists apply
// (src/frontend/autocast.h).
#include "frontend/autocast.h"

#include "frontend/graph.h"

namespace kiln {

namespace {
thread_local std::optional<DType> g_autocast;
}

Autocast::Autocast(std::optional<DType> dtype) : prev_(g_autocast) {
  if (dtype && *dtype != DType::BF16 && *dtype != DType::F16)
    frontend::fail("Autocast", "the dtype must be bf16 or f16 (or nullopt to turn autocast off), got " +
                                   to_string(*dtype));
  g_autocast = dtype;
}
Autocast::~Autocast() { g_autocast = prev_; }

std::optional<DType> autocast_dtype() { return g_autocast; }

namespace frontend {

AutocastOp::AutocastOp(AutocastList list) : list_(list), scope_(g_autocast) { g_autocast.reset(); }
AutocastOp::~AutocastOp() { g_autocast = scope_; }

Tensor AutocastOp::operator()(const Tensor& x) const {
  if (!scope_ || !x.defined()) return x;
  DType t = x.dtype();
  bool half = t == DType::F16 || t == DType::BF16;
  if (list_ == AutocastList::Lower && (half || t == DType::F32)) return x.to(*scope_);
  if (list_ == AutocastList::F32 && half) return x.to(DType::F32);
  return x;
}
std::optional<Tensor> AutocastOp::operator()(const std::optional<Tensor>& x) const {
  if (!x) return x;
  return (*this)(*x);
}

}  // namespace frontend
}  // namespace kiln
