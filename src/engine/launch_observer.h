// A hook on the realize driver's launches: kiln::Jit (src/frontend/jit.cpp) installs one while it
// records a call, and the run stage (engine/run.cpp) shows it every launch with its buffers.
#pragma once
#include <memory>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/launcher.h"

namespace kiln::engine {

// Sees every launch the realize driver makes on this thread while installed (jit capture).
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual void launched(const runtime::Launch& l, const std::vector<std::shared_ptr<Buffer>>& outputs,
                        const std::vector<std::shared_ptr<Buffer>>& inputs) = 0;
  // How many references to b it keeps (what an in-place write may discount: engine/in_place.h).
  virtual long holds(const Buffer&) const { return 0; }
};
LaunchObserver*& launch_observer();  // thread-local; nullptr when none

}  // namespace kiln::engine
