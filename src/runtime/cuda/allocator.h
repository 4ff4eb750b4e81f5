// The caching allocator for device memory. Freed blocks are kept by rounded size and reused; all
// kiln work runs on one stream per device, so a block freed on the host may be handed out again at
// once: the stream orders the old readers before the new writer. When the device runs out, the
// cache is released and the allocation retried.
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/cuda/api.h"

namespace kiln::runtime::cuda {

struct AllocatorStats {
  size_t in_use = 0;          // bytes handed out
  size_t cached = 0;          // bytes kept for reuse
  size_t peak = 0;            // largest in_use seen
  int64_t device_allocs = 0;  // cuMemAlloc calls
};

CUdeviceptr device_alloc(int ordinal, size_t bytes);
void device_free(int ordinal, CUdeviceptr p, size_t bytes);
AllocatorStats allocator_stats(int ordinal);
void reset_peak(int ordinal);      // peak = in_use
void release_cached(int ordinal);  // gives cached blocks back to the driver

}  // namespace kiln::runtime::cuda
