// Shared by the CPU opt tests (register tiles, PACK): a kernel's opts as one string and random f32
// inputs.
#pragma once
#include <string>

#include "codegen/passes.h"
#include "helpers.h"

namespace kiln::testing {

// The opts a lowering took (KILN_DEBUG=3 names), each followed by a space.
inline std::string opts_of(const codegen::Lowered& low) {
  std::string all;
  for (auto& o : low.opts) all += o + " ";
  return all;
}

inline Tensor rand_f32(const Shape& s, uint64_t seed) { return random_tensor(s, DType::F32, -1, 1, seed); }

}  // namespace kiln::testing
