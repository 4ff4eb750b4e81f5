// Helpers for the tile programming model tests: random inputs, host references, error capture.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/tile.h>

#include <functional>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln::testing {

inline Tensor tile_input(Shape s, uint64_t seed, DType t = DType::F32, double lo = -1, double hi = 1) {
  return random_tensor(s, t, lo, hi, seed);
}

// Values of t (as floats) must be within atol + rtol * |want| of `want`.
inline void expect_near_all(const Tensor& t, const std::vector<float>& want, double rtol, double atol) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; i++)
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
      bad++;
    }
}

// 1-based line of the first line of `src` containing `marker`.
inline int line_of(const std::string& src, const std::string& marker) {
  size_t pos = src.find(marker);
  int line = 1;
  for (size_t i = 0; i < pos && i < src.size(); i++) line += src[i] == '\n';
  return line;
}

}  // namespace kiln::testing
