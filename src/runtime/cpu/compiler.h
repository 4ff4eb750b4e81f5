// The CPU compiler: finds the system C compiler and builds C source into a shared object.
#pragma once
#include <string>

namespace kiln::runtime {

// Path of the C compiler: KILN_CC, else cc, gcc or clang found on PATH; throws kiln::Error if none.
std::string find_c_compiler();
// Identity of the compiler and flags (part of every cache key).
const std::string& compiler_id();
// Compiles `source` into the shared object `so_path` (written atomically). `what` names the kernels
// for error messages; a failed compile throws kiln::Error with the compiler's output.
void compile_shared_object(const std::string& source, const std::string& so_path, const std::string& what);

}  // namespace kiln::runtime
