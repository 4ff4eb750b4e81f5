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
  bool scratch = false;                  // the launcher gives each thread a kernel's scratch (CPU: PACK)
  // Memory one core of a tile program may have for its CBs (src/tile): a GPU block's shared memory
  // (opt-in limit); the CPU holds tile programs to an H100's (227 KB), so that one that runs there
  // runs on the GPU too; 0 where tile programs do not run.
  int64_t tile_core_bytes = 0;
};

}  // namespace kiln::codegen
