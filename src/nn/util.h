// Argument checks shared by the nn layers (internal).
#pragma once
#include <string>
#include <vector>

#include "kiln/nn/module.h"

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

// A realized copy of t in a buffer of its own. Parameters must not share a BUFFER node: autograd
// keys leaves by node, so leaves assigned equal values (zeros) or another leaf's value would share
// one entry and all but one would get no gradient. Copies through the host.
inline Tensor fresh(const Tensor& t) {
  Tensor v = t.detach();
  if (v.dtype() == DType::F32) {
    auto d = v.to_vector<float>();
    return from_buffer(d.data(), v.shape(), DType::F32);
  }
  auto d = v.to_vector<double>();
  Tensor c = from_buffer(d.data(), v.shape(), DType::F64);
  return v.dtype() == DType::F64 ? c : c.to(v.dtype()).contiguous().realize();
}

}  // namespace kiln::nn::detail
