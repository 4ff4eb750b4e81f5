// C renderer: linear program -> one C function per kernel plus a uniform entry point
// `void <symbol>_call(void** bufs, int64_t start, int64_t end)` over the outermost loop's range.
#pragma once
#include <string>

#include "codegen/program.h"

namespace kiln::codegen {

std::string render_c(const Program& p);
const char* c_prelude();  // helpers shared by all kernels of a compiled file (half conversions)

}  // namespace kiln::codegen
