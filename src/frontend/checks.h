// Device-side checks: conditions on values only the device sees (token ids against a vocabulary,
// probabilities), computed lazily with the op's result and verified when its schedule has run,
// like PyTorch's device-side asserts but raised as a kiln::Error naming the op.
#pragma once
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::frontend {

// Registers `ok` (a lazy 0-d bool) to be computed by the next realize on its device; if it is
// false there, that realize throws kiln::Error(message). Inside a kiln::Jit recording it is also
// checked after every replay of the captured step.
void require(const Tensor& ok, std::string message);

struct PendingCheck {
  Tensor ok;
  std::string message;
};
// The checks registered since the last realize, handed to it (and forgotten here).
std::vector<PendingCheck> take_checks();
// Throws the first failed check's message (each `ok` must be realized).
void verify(const std::vector<PendingCheck>& checks);

}  // namespace kiln::frontend
