// What a device offers the kernels rendered for it: each runtime backend reports its own
// (runtime/backend.h) and the lowering hands them to the renderer. The defaults are what every
// CUDA device guarantees, so a kernel rendered with them runs on any GPU.
#pragma once
#include <cstdint>

namespace kiln::codegen {

struct DeviceLimits {
  int max_threads_per_block = 1024;
  int64_t shared_per_block = 48 * 1024;  // bytes of on-chip memory one block may use (opt-in limit)
  int warp_size = 32;                    // threads that run in lockstep
  int vector_bytes = 16;                 // the widest load or store one thread makes
  int cores = 1;                         // multiprocessors of a GPU, worker threads of the CPU
  int64_t l2_bytes = 0;                  // last-level cache, where known
};

}  // namespace kiln::codegen
