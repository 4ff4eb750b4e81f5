// Output buffers of a schedule, from its memory plan (see arena.h).
#include "engine/arena.h"

#include "ir/symbolic.h"

namespace kiln::engine {

OutputBuffers allocate_outputs(const schedule::Schedule& s, const schedule::MemoryPlan& plan, Device device,
                               bool at_capacity) {
  OutputBuffers b;
  if (plan.arena_bytes)
    b.arena = std::make_shared<Buffer>(DType::U8, static_cast<int64_t>(plan.arena_bytes), device);
  b.outs.resize(s.kernels.size());
  for (size_t k = 0; k < s.kernels.size(); k++) {
    const auto& outputs = s.kernels[k].outputs;
    for (size_t o = 0; o < outputs.size(); o++) {
      const ir::NodeRef& n = outputs[o];
      int64_t at = plan.offset[k][o];
      if (o == 0 && s.kernels[k].in_place) {
        b.outs[k].push_back(s.kernels[k].in_place->buffer);  // updated in place
      } else if (at >= 0) {
        b.outs[k].push_back(std::make_shared<Buffer>(b.arena, static_cast<size_t>(at), n->dtype, n->numel()));
        if (at_capacity) b.outs[k].back()->capacity = ir::capacity(*n);  // the room planned
      } else {
        b.outs[k].push_back(
            std::make_shared<Buffer>(n->dtype, n->numel(), device, at_capacity ? ir::capacity(*n) : 0));
        b.own_bytes += b.outs[k].back()->nbytes();
      }
    }
  }
  return b;
}

}  // namespace kiln::engine
