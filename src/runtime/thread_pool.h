// The runtime's thread pool: splits a kernel's outermost loop over KILN_THREADS workers.
#pragma once
#include <cstdint>
#include <functional>

namespace kiln::runtime {

int num_threads();
// Threads the pool really has (num_threads() when it was created): parallel_for runs at most this
// many chunks at once.
int pool_threads();
// Runs fn(start, end) over [0, n) in up to num_threads() contiguous chunks; returns when all finish.
// Calls from several threads take turns; fn must not call parallel_for.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kiln::runtime
