// Argument checks shared by the nn layers (internal).
#pragma once
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"
#include "kiln/nn/module.h"
#include "runtime/buffer.h"

namespace kiln::nn::detail {

inline int64_t positive(const char* module, const char* what, int64_t v) {
  if (v <= 0) module_error(module, std::string(what) + " must be > 0, got " + std::to_string(v));
  return v;
}

// "(N, C, H, W)"-style description of an expected shape, for messages
inline std::string dims_str(const std::vector<std::string>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); i++) s += (i ? ", " : "") + d[i];
  return s + ")";
}

inline void need_float(const char* module, const Tensor& x) {
  if (!is_float(x.dtype()))
    module_error(module,
                 "expected a float input, got " + to_string(x.dtype()) + " of shape " + shape_str(x.shape()));
}

// While one is alive on this thread, the values modules give their parameters are not computed:
// each parameter gets a buffer of its own with no values yet. For an owner that initializes every
// parameter of its modules itself (GPT), which checks that it has.
class DeferredInit {
 public:
  DeferredInit() { depth()++; }
  ~DeferredInit() { depth()--; }
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  static bool active() { return depth() > 0; }

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

// A realized copy of t in a buffer of its own, on t's device (under DeferredInit: the buffer only).
// Parameters must not share a BUFFER node: autograd keys leaves by node, so leaves assigned equal
// values (zeros) or another leaf's value would share one entry and all but one would get no gradient.
inline Tensor fresh(const Tensor& t) {
  if (!DeferredInit::active()) return frontend::own_copy(t);
  auto b = std::make_shared<Buffer>(t.dtype(), t.numel(), t.device());
  return Tensor(frontend::buffer_node(b, t.shape()));
}

}  // namespace kiln::nn::detail
