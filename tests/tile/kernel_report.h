// Error reports of shipped kernels against their float64 references (src/tile/ops/reference.h):
// printed with the test output, checked against a bound per dtype.
#pragma once
#include <cstdio>
#include <string>

#include "kiln/tile_ops.h"
#include "tile/ops/programs.h"
#include "tile/ops/reference.h"
#include "tile/ops/view2d.h"
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

// Prints the CB memory per core of a shipped kernel's program, with the compile-time constant that
// sizes its blocks (e.g. K, the chunk of a row), and checks it against the budget the host side
// sizes blocks for (well within the limit every launch checks).
// `constant`: the block-size constant to print (`other` where the program has none of that name).
inline void report_cb_bytes(const std::string& what, const tile::Program& p, std::string constant,
                            const std::string& other = "") {
  std::string src = p.generated_source(), key = "constexpr long long " + constant + " = ";
  size_t at = src.find(key);
  if (at == std::string::npos && !other.empty()) {
    constant = other;
    key = "constexpr long long " + constant + " = ";
    at = src.find(key);
  }
  long long v = at == std::string::npos ? -1 : std::stoll(src.substr(at + key.size()));
  std::printf("[ cb bytes ] %-44s %s = %lld: %lld bytes per core\n", what.c_str(), constant.c_str(), v,
              static_cast<long long>(p.cb_bytes()));
  EXPECT_LE(p.cb_bytes(), tile::ops::kCBBudget) << what;
  EXPECT_LE(p.cb_bytes(), tile::Program::cb_bytes_limit()) << what;
}

// Inputs as the kernels see them (bf16 inputs already rounded), in double.
inline tile::ref::Vec ref_values(const Tensor& t) { return tile::ref::values(t); }

}  // namespace kiln::testing
