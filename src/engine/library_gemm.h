// Whether a kernel's launch goes to the backend's GEMM library (the generated kernel stays the
// fallback): the library GEMM runner (engine/runners.cpp) asks the match, the bind stage sets it.
#pragma once
#include <memory>

#include "runtime/launcher.h"
#include "schedule/schedule.h"

namespace kiln::engine {

// The matmul kernel k is, when it is one worth the library: every dim at least 64 and at least 2^24
// multiply-adds; nullptr otherwise. Cached per kernel AST.
std::shared_ptr<const schedule::MatchedMatmul> library_gemm_match(const schedule::Kernel& k);
// Sets l.gemm (and the operands' offsets) to the match of kernel k.
void use_library_gemm(runtime::Launch& l, const schedule::Kernel& k);

}  // namespace kiln::engine
