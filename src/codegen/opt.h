// Kernel optimizations on the AST, before linearization (KILN_NOOPT=1 turns them off).
#pragma once
#include <string>
#include <vector>

#include "ir/node.h"

namespace kiln::codegen {

// Merges adjacent output loops when that makes index math no more expensive (contiguous access
// becomes one flat loop). Returns the new AST; `log` collects the opts taken (KILN_DEBUG=3).
ir::NodeRef collapse_loops(const ir::NodeRef& ast, std::vector<std::string>& log);
// Makes independent reduces over loops of the same sizes share one set of reduce ranges, so they
// run in one loop (x.sum(1) + x.max(1) reads x once).
ir::NodeRef merge_reduces(const ir::NodeRef& ast, std::vector<std::string>& log);
// Renumbers RANGE ids: output loops 0..n-1 in order, then reduce loops.
ir::NodeRef renumber_ranges(const ir::NodeRef& ast);

}  // namespace kiln::codegen
