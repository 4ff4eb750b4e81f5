// Whether a kernel's launch goes to the backend's GEMM library (the generated kernel stays the
// fallback), decided in the bind stage (engine/bind.cpp).
#pragma once
#include "runtime/launcher.h"
#include "schedule/schedule.h"

namespace kiln::engine {

// Sets l.gemm (and the operands' offsets) when kernel k is a matmul worth the library: every dim at
// least 64 and at least 2^24 multiply-adds. The match is cached per kernel AST.
void use_library_gemm(runtime::Launch& l, const schedule::Kernel& k);

}  // namespace kiln::engine
