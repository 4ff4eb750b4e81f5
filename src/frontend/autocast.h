// The ops' side of kiln::Autocast (include/kiln/autocast.h): each op of the two lists opens an
// AutocastOp, which casts the op's inputs and runs the op's body with autocast off.
#pragma once
#include <optional>

#include "kiln/autocast.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

enum class AutocastList {
  Lower,  // matmul-like: floating inputs in the autocast dtype
  F32,    // softmax, reductions, norms, losses, exp/log/pow: half inputs in f32
};

// Opened at the top of an op of `list`; true when a scope is on. While it lives autocast is off, so
// the op's body (built from other ops) is not cast again:
//   if (AutocastOp ac{AutocastList::Lower}) return ac(a).matmul(ac(b));
class AutocastOp {
 public:
  explicit AutocastOp(AutocastList list);
  ~AutocastOp();
  AutocastOp(const AutocastOp&) = delete;
  AutocastOp& operator=(const AutocastOp&) = delete;
  explicit operator bool() const { return scope_.has_value(); }
  // x as the op computes on it (unchanged where the list does not cast its dtype, or with no scope)
  Tensor operator()(const Tensor& x) const;
  std::optional<Tensor> operator()(const std::optional<Tensor>& x) const;

 private:
  AutocastList list_;
  std::optional<DType> scope_;  // the scope's dtype, taken when opened
};

}  // namespace kiln::frontend
