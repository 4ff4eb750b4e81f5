// Runners: what executes each kernel of a schedule. For every kernel the engine asks the runners in
// order (those registered by layers above, the flash-attention kernel, the backend's GEMM library)
// and takes the first that takes it, else the generated code (KILN_DEBUG=3: one line per kernel).
// A runner also says which special graph nodes (ATTENTION, LAYER_NORM) it computes as kernels of
// their own; the graph rewrites put the composite in place of the others.
#pragma once
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "ir/node.h"
#include "runtime/backend.h"
#include "schedule/schedule.h"

namespace kiln::engine {

class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string name(const runtime::Backend& b) const = 0;
  // Whether it computes the graph node n on backend b as a kernel of its own.
  virtual bool takes_node(const ir::Node&, const runtime::Backend&) const { return false; }
  // Whether it runs kernel k of a schedule on backend b.
  virtual bool takes(const schedule::Kernel& k, const runtime::Backend& b) const = 0;

  // Whether the kernel's program is the lowering's (codegen), compiled by the backend. A runner that
  // brings its own program says false and gives describe() and load() instead.
  virtual bool lowers() const { return true; }
  // The kernel as messages, timings and validation see it: its name and globals, no source.
  virtual codegen::Lowered describe(const schedule::Kernel& k) const;
  // Its launch of k on backend b (Launch::call), made once per realize before any kernel runs.
  virtual runtime::Launch load(const schedule::Kernel& k, runtime::Backend& b) const;
  // At bind: sets what the launch of k needs besides its program (the GEMM library's operands).
  virtual void bind(runtime::Launch&, const schedule::Kernel&) const {}
};

// The one op of a kernel that computes a special node (SINK(ATTENTION) or SINK(LAYER_NORM, ...)),
// else nullptr. Its runner takes the kernel's sizes as they are in this realize.
const ir::Node* special_op(const schedule::Kernel& k);
// Registers a runner (as the program starts), asked before the built-in ones; returns true.
bool register_runner(const Runner* r);
// The runner of each kernel of s on backend b.
std::vector<const Runner*> choose_runners(const schedule::Schedule& s, const runtime::Backend& b);
// KILN_DEBUG=3: "kiln: runner <kernel name> -> <runner>" for each kernel.
void describe_runners(const std::vector<const Runner*>& runners,
                      const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered,
                      const runtime::Backend& b);
// Whether a runner of n's device computes node n as a kernel of its own (false for a node of no
// device: a graph of constants).
bool node_runs(const ir::Node& n);

}  // namespace kiln::engine
