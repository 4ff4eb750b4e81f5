// The stages of a realize (engine/realize.cpp runs them in this order), each in its own file:
// rewrite -> schedule -> runners (runners.h) -> lower -> load (the backend compiles) -> memory plan ->
// bind -> run (-> validate).
#pragma once
#include <memory>
#include <vector>

#include "codegen/passes.h"
#include "engine/arena.h"
#include "engine/runners.h"
#include "ir/node.h"
#include "kiln/device.h"
#include "runtime/backend.h"
#include "runtime/launcher.h"
#include "schedule/memory_plan.h"
#include "schedule/schedule.h"

namespace kiln::engine {

namespace viz {
class Record;
}

// rewrite.cpp: the graph rewrites (ir/graph_rewrite.h) of the roots and of the nodes held from
// outside the graph (survivors.h), in one pass so equal nodes get one image.
struct Rewritten {
  std::vector<ir::NodeRef> roots;  // the roots' images, in order
  std::vector<ir::NodeRef> held;   // the held nodes' images
};
Rewritten rewrite(const std::vector<ir::NodeRef>& roots);

// schedule_kernels.cpp: fusion into kernels (KILN_DEBUG=3 with the lowering), planned around the
// backend's GEMM library when it has one.
schedule::Schedule schedule_kernels(const std::vector<ir::NodeRef>& rewritten, const runtime::Backend& b);

// symbolic.cpp: the values of the symbolic sizes (ir/symbolic.h) of this realize, checked, and for
// each kernel that reads some, a buffer of its values appended to its inputs (its last argument).
void bind_symbolic(schedule::Schedule& s, const std::vector<ir::NodeRef>& rewritten, Device device);

// The runner of each kernel (runners.h: choose_runners).
using Runners = std::vector<const Runner*>;

// lower.cpp: each kernel's AST through the pass list for the backend's target and limits (cached),
// or its runner's description where the runner brings its own program (KILN_DEBUG=3: the runners).
using Lowerings = std::vector<std::shared_ptr<const codegen::Lowered>>;
Lowerings lower(const schedule::Schedule& s, const Runners& r, const runtime::Backend& b);
// The launches: the lowered programs compiled and loaded by the backend (through its cache), the
// other kernels' from their runners.
std::vector<runtime::Launch> load(const schedule::Schedule& s, const Lowerings& lowered, const Runners& r,
                                  runtime::Backend& b);

// memory.cpp: the memory plan (liveness: survivors.h) and the output buffers it places (arena.h);
// release() makes the planned outputs forget the arena once the schedule has run.
struct Memory {
  schedule::MemoryPlan plan;
  OutputBuffers buffers;
};
Memory plan_memory(const schedule::Schedule& s, const Rewritten& g, Device device);
void release(const schedule::Schedule& s, const Memory& m);
// After a failed bind or run: every kernel output forgets its buffer, so that no later realize reads
// the output of a kernel that never ran as if it had.
void forget_outputs(const schedule::Schedule& s);

// bind.cpp: each kernel's launch, prepared before any runs: its program, argument pointers and
// options (threads, its runner's: the GEMM library); binds the kernel outputs to their buffers
// (KILN_DEBUG=3).
struct Bound {
  runtime::Launch launch;
  std::vector<void*> args;
  int64_t bytes = 0;  // of the buffers it reads and writes
};
std::vector<Bound> bind_launches(const schedule::Schedule& s, const Lowerings& lowered,
                                 const std::vector<runtime::Launch>& programs, const Runners& r,
                                 const Memory& m, runtime::Backend& b, Device device);

// run.cpp: the launches in order, timed at KILN_DEBUG=2, KILN_PROFILE and KILN_VIZ, shown to the
// launch observer; each kernel validated right after it runs with KILN_VALIDATE (validate.h).
void run(const schedule::Schedule& s, const Lowerings& lowered, std::vector<Bound>& bound, const Memory& m,
         runtime::Backend& b, viz::Record* rec);

}  // namespace kiln::engine
