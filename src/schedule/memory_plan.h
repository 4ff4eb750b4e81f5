// Memory planning: which kernel outputs of one schedule share an arena, and at which offsets.
// Runs between fusion (the schedule) and execution; a pure function of the schedule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "schedule/schedule.h"

namespace kiln::schedule {

// A value that lives from the kernel that writes it to the last kernel that reads it (inclusive).
struct LiveRange {
  int64_t first = 0, last = 0;
  size_t bytes = 0;
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // one per range, multiples of the alignment
  size_t peak = 0;              // arena size: the highest end of any placed range
  size_t total = 0;             // the aligned sizes summed: the memory without reuse
};

constexpr size_t kArenaAlignment = 256;

// Places ranges in one arena so that ranges live at the same kernel never overlap in memory:
// largest first, each in the smallest gap left by the ranges it overlaps in time (best fit).
ArenaPlan plan_arena(const std::vector<LiveRange>& ranges, size_t alignment = kArenaAlignment);

struct MemoryPlan {
  // [kernel][output]: the byte offset in the arena, or -1 for an output that gets a buffer of its own
  std::vector<std::vector<int64_t>> offset;
  size_t arena_bytes = 0;  // the planned peak
  size_t no_reuse_bytes = 0;
  size_t planned = 0;  // number of intermediates in the arena
};

// Plans every kernel output that is not in `survivors` (the roots, and outputs something may read
// after the schedule: see engine/survivors.h) into the arena, but for in-place outputs
// (Kernel::in_place), which are the buffers they update. at_capacity: symbolic outputs get room for
// their largest size (ir::capacity), so the plan holds for every binding.
MemoryPlan plan_memory(const Schedule& s, const std::unordered_set<const ir::Node*>& survivors,
                       bool at_capacity = false);

}  // namespace kiln::schedule
