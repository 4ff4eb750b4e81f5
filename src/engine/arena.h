// Binds a schedule's kernel outputs to memory as the memory plan says: planned intermediates to
// views at their offsets in one arena buffer, in-place outputs to the buffers they update, the
// others to buffers of their own. Allocation goes
// through Buffer, so a device provides its own memory.
#pragma once
#include <memory>
#include <vector>

#include "runtime/buffer.h"
#include "schedule/memory_plan.h"

namespace kiln::engine {

struct OutputBuffers {
  std::shared_ptr<Buffer> arena;                           // null when nothing is planned
  std::vector<std::vector<std::shared_ptr<Buffer>>> outs;  // [kernel][output]
  size_t own_bytes = 0;                                    // bytes of the outputs with buffers of their own
};

// at_capacity: outputs of their own with symbolic sizes get room for their largest (ir::capacity).
OutputBuffers allocate_outputs(const schedule::Schedule& s, const schedule::MemoryPlan& plan, Device device,
                               bool at_capacity = false);

}  // namespace kiln::engine
