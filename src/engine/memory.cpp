// The memory plan stage (see stages.h).
#include "engine/launch_observer.h"
#include "engine/stages.h"
#include "engine/survivors.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"

namespace kiln::engine {

Memory plan_memory(const schedule::Schedule& s, const Rewritten& g, Device device) {
  Memory m;
  // a step being captured (kiln::Jit) replays at other values of its symbolic sizes: room for the largest
  const bool at_capacity = launch_observer() && ir::vars_in_use();
  m.plan = schedule::plan_memory(s, surviving_outputs(s, g.roots, g.held), at_capacity);
  m.buffers = allocate_outputs(s, m.plan, device, at_capacity);
  stats().arena_bytes += static_cast<int64_t>(m.plan.arena_bytes);
  stats().arena_no_reuse_bytes += static_cast<int64_t>(m.plan.no_reuse_bytes);
  return m;
}

// The arena is reused by the next schedule: planned nodes forget it, so a later graph that reaches
// one (a case the survivor analysis missed) recomputes it instead of reading stale memory.
void release(const schedule::Schedule& s, const Memory& m) {
  for (size_t i = 0; i < s.kernels.size(); i++)
    for (size_t o = 0; o < s.kernels[i].outputs.size(); o++)
      if (m.plan.offset[i][o] >= 0) ir::set_buffer(*s.kernels[i].outputs[o], nullptr);
}

void forget_outputs(const schedule::Schedule& s) {
  for (auto& k : s.kernels)
    for (auto& o : k.outputs) ir::set_buffer(*o, nullptr);
}

}  // namespace kiln::engine
