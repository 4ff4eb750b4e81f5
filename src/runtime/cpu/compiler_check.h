// The compiler self-test: which optimization flags make a C or C++ compiler build kiln's kernels
// right. Canary kernels with known answers are compiled with each candidate set and run, once per
// compiler identity (the answer is kept in the cache directory).
#pragma once
#include <string>
#include <vector>

namespace kiln::runtime {

enum class Language { C, Cxx };
enum class CompilerFamily { Gcc, Clang, Other };

// From the first lines of `cc --version`.
CompilerFamily compiler_family(const std::string& version_text);

// The flags every kernel compile passes, whatever the optimization level: target, position-
// independent code, wrapping integers, no errno from math, no implicit FMA contraction (a value
// recomputed in two kernels rounds the same in both), the language standard.
std::string base_flags(Language lang, CompilerFamily family);

// Optimization flag sets to try, fastest first (e.g. GCC 12 miscompiles some reverse-stride loops
// unless loop vectorization is off).
std::vector<std::string> candidate_opt_flags(Language lang, CompilerFamily family);

// The canary program's source: it exits 0 when every canary kernel gave its known answer.
const char* canary_source();

// The first candidate under which the canaries pass, for compiler `cc` whose identity (path, full
// version text, binary size and time) is `identity`: read from `cache_dir` (a usable directory,
// cache_dir.h) when checked before, else checked now and written there as a checked entry. Throws kiln::Error
// naming the compiler when none passes.
std::string checked_opt_flags(const std::string& cc, const std::string& identity, Language lang,
                              CompilerFamily family, const std::string& cache_dir);

}  // namespace kiln::runtime
