// Error reports of shipped kernels against their float64 references (src/tile/ops/reference.h):
// printed with the test output, checked against a bound per dtype.
#pragma once
#include <cstdio>
#include <string>

#include "kiln/tile_ops.h"
#include "tile/ops/reference.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {

// Prints "kernel dtype: max abs .., max rel .." and checks max abs <= atol.
inline void report_errors(const std::string& what, DType t, const Tensor& got, const tile::ref::Vec& want,
                          double atol) {
  tile::ref::Errors e = tile::ref::errors(got, want);
  std::printf("[ error    ] %-44s %-4s max abs %.3e  max rel %.3e\n", what.c_str(), dtype_name(t), e.max_abs,
              e.max_rel);
  EXPECT_LE(e.max_abs, atol) << what << " " << dtype_name(t);
}

// Inputs as the kernels see them (bf16 inputs already rounded), in double.
inline tile::ref::Vec ref_values(const Tensor& t) { return tile::ref::values(t); }

}  // namespace kiln::testing
