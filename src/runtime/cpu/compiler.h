// The CPU compiler: finds the system C (generated kernels) or C++ (tile kernels) compiler and
// builds source into a shared object.
#pragma once
#include <string>

#include "runtime/cpu/compiler_check.h"

namespace kiln::runtime {

// Path of the C compiler: KILN_CC, else cc, gcc or clang found on PATH; throws kiln::Error if none.
std::string find_c_compiler();
// Path of the C++ compiler: KILN_CXX, else c++, g++ or clang++ found on PATH.
std::string find_cxx_compiler();
// Identity of the compiler and the flags it compiles kernels with (part of every cache key): the
// flags are the fastest set under which the compiler self-test passes (compiler_check.h).
const std::string& compiler_id(Language lang = Language::C);
// The widest vector registers the C compiler builds kernels with, in bytes: 64 where its flags
// enable AVX-512 (the self-test may turn it off), 32 with AVX, else 16 (SSE2, NEON). The register
// tiles are sized to them (codegen/opt.h).
int kernel_vector_bytes();
// Compiles `source` into the shared object `so_path`, written as a checked program-cache entry
// (cache_entry.h; dlopen reads it as it is). `what` names the kernels
// for error messages; `include_dir` (may be empty) is added with -I; a failed compile throws
// kiln::Error with the compiler's output.
void compile_shared_object(const std::string& source, const std::string& so_path, const std::string& what,
                           Language lang = Language::C, const std::string& include_dir = "");

}  // namespace kiln::runtime
