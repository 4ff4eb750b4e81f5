// THREAD (CPU): the runtime splits a kernel's outermost output loop over its threads (linearize.h).
// When that loop has too few steps to share out evenly (a batch of 2, the m tiles of a short matrix),
// it is merged with the next output loop, so the threads split (batch x heads) or (m tiles x n tiles).
#include <algorithm>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

namespace {}  // namespace

NodeRef thread_outer_loops(const NodeRef& ast, int threads, std::vector<std::string>& log) {
  if (threads <= 1) return ast;
  NodeRef cur = ast;
  for (;;) {
    std::vector<NodeRef> g, reduces;
    bool lanes = false;
    for (auto& n : ir::toposort({cur})) {
      if (n->op == Op::RANGE && n->arg[2] == ir::kGlobalRange) g.push_back(n);
      lanes |= n->op == Op::RANGE && n->arg[2] == ir::kUpcastRange;
      if (n->op == Op::REDUCE) reduces.push_back(n);
    }
    std::sort(g.begin(), g.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
    if (g.size() < 2 || g[0]->arg[1] >= kStepsPerThread * threads) return cur;
    if (ir::is_symbolic_range(*g[0]) || ir::is_symbolic_range(*g[1])) return cur;
    // the merged loop's index costs a division and a modulo per step: only where each step is a loop
    // nest or a register tile, not one element
    if (g.size() == 2 && !lanes) return cur;
    // a reduce that does not move with the second loop is computed once per step of the first
    // (linearize hoists it); merged, it would run once per step of both
    if (!std::all_of(reduces.begin(), reduces.end(),
                     [&](const NodeRef& red) { return moves_with(red, g[1]); }))
      return cur;
    int64_t a = g[0]->arg[1], b = g[1]->arg[1];
    NodeRef flat = ir::range_of_kind(g[0]->arg[0], a * b, ir::kGlobalRange);
    cur =
        ir::simplify(ir::substitute(cur, {{g[0].get(), ir::idiv(flat, b)}, {g[1].get(), ir::mod(flat, b)}}));
    log.push_back("THREAD_LOOPS " + std::to_string(a) + "x" + std::to_string(b));
  }
}

}  // namespace kiln::codegen
