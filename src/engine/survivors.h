// Which kernel outputs of a schedule may be read after it: those keep buffers of their own, the
// others share the schedule's arena (schedule/memory_plan.h). Used by the realize driver.
#pragma once
#include <unordered_set>
#include <vector>

#include "ir/node.h"
#include "schedule/schedule.h"

namespace kiln::engine {

// Unrealized non-root nodes under `roots` (not below realized nodes) that something outside this
// graph refers to (a Tensor handle, a lazy graph that is not being realized, a container, a graph
// kept for autograd below a realized node): their values may be asked for after this realize.
// Found by reference counts: a node is held from outside when it has more owners than the edges of
// this graph, this function's list and the caller's `roots` account for, so call it before anything
// else (rewrites, the schedule) takes references.
std::vector<ir::NodeRef> held_outside(const std::vector<ir::NodeRef>& roots);

// The kernel outputs that must outlive the schedule: the (rewritten) roots, and every output that
// a later realize of a held node would read: realizing a node rewrites its graph (to the same
// hash-consed nodes as now) and reads the buffers of the first realized nodes below it, so the
// outputs reached from the held nodes' rewritten images (`held_images`, ir::rewrite_graph of
// held_outside's nodes) without passing another output survive.
std::unordered_set<const ir::Node*> surviving_outputs(const schedule::Schedule& s,
                                                      const std::vector<ir::NodeRef>& rewritten_roots,
                                                      const std::vector<ir::NodeRef>& held_images);

}  // namespace kiln::engine
