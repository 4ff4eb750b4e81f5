// Command-line numbers for the examples: a whole number in [lo, hi], or a kiln::Error naming the
// program, the flag and the value.
#pragma once
#include <kiln/error.h>

#include <cstdint>
#include <exception>
#include <string>

inline int64_t whole_number_arg(const std::string& program, const std::string& flag, const std::string& v,
                                int64_t lo, int64_t hi) {
  size_t used = 0;
  long long n = lo - 1;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || n < lo || n > hi)
    throw kiln::Error(program + ": " + flag + " " + v + ": expected a whole number from " +
                      std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}
