// The schedule stage (see stages.h).
#include "engine/launch_observer.h"
#include "engine/stages.h"
#include "engine/viz.h"
#include "kiln/debug.h"

namespace kiln::engine {

schedule::Schedule schedule_kernels(const std::vector<ir::NodeRef>& rewritten, const runtime::Backend& b) {
  schedule::Schedule s = schedule::make_schedule(
      rewritten, {.library_gemm = !b.gemm_library().empty(), .explain = viz::enabled()});
  // in a step a kiln::Jit records (a launch observer watches), or everywhere with KILN_HFUSE=2
  if (settings().hfuse == 2 || (settings().hfuse == 1 && launch_observer()))
    s = schedule::fuse_horizontally(std::move(s));
  stats().schedules++;
  return s;
}

}  // namespace kiln::engine
