// kiln_fuzz's checker: realizes one generated graph with kiln and compares its outputs, and for
// gradient graphs its input gradients, with the float64 reference interpreter and finite differences.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::fuzz {

// --selftest damages some graphs' results on purpose: the checker must report every one.
enum class Corruption { None, Output, Gradient, Crash };
Corruption corruption_of(uint64_t seed);

struct Result {
  enum class Status { Ok, Mismatch, Error } status = Status::Ok;
  bool grad = false;
  bool bounded = true;   // false: no finite error bound for some gradient, which went unchecked
  double max_error = 0;  // the largest |kiln - reference| of a mismatch
  std::string report;    // what differs, and a standalone repro program
};

Result check(uint64_t seed, double grad_fraction, Corruption corruption = Corruption::None);

// The repro program of a seed, with the reference's expected values; realizes nothing.
std::string describe(uint64_t seed, double grad_fraction);

}  // namespace kiln::fuzz
