// Whether a kernel's launch goes to the backend's GEMM library (the generated kernel stays the
// fallback): the library GEMM runner (engine/runners.cpp) asks the match, the bind stage sets it.
#pragma once
#include <memory>

#include "runtime/launcher.h"
#include "schedule/schedule.h"

namespace kiln::engine {

// The matmul kernel k is, when it is one worth the library: every dim at least 64 and at least 2^24
// multiply-adds; nullptr otherwise. Cached per kernel AST. A kernel with symbolic sizes is matched
// at its variables' largest values: whether the library can run it at all.
std::shared_ptr<const schedule::MatchedMatmul> library_gemm_match(const schedule::Kernel& k);
// Sets l.gemm (and the operands' offsets) to the match of kernel k. With symbolic sizes, the match
// at this realize's values, and l.rebind to match again at a replay's: where the library is not
// worth it at those values, l.gemm is null and the generated kernel runs.
void use_library_gemm(runtime::Launch& l, const schedule::Kernel& k);

}  // namespace kiln::engine
