// SWAP (CPU): which output loop of a reduce runs outermost (see opt.h).
#include <algorithm>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

namespace {

// The bytes a load reads over the kernel: the sizes of the ranges its index moves with, times its
// element size.
int64_t bytes_read(const NodeRef& load) {
  int64_t n = dtype_size(load->dtype);
  for (auto& x : ir::toposort({load->src[1]}))
    if (x->op == Op::RANGE) n *= x->arg[1];
  return n;
}

}  // namespace

NodeRef order_output_loops(const NodeRef& ast, std::vector<std::string>& log) {
  std::vector<NodeRef> g, loads;
  bool reduces = false;
  for (auto& n : ir::toposort({ast})) {
    if (n->op == Op::RANGE && n->arg[2] == ir::kGlobalRange) g.push_back(n);
    if (n->op == Op::LOAD) loads.push_back(n);
    reduces |= n->op == Op::REDUCE;
  }
  if (!reduces || g.size() < 2) return ast;
  std::sort(g.begin(), g.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  const NodeRef& outer = g[0];
  int64_t outer_bytes = 0, best_bytes = 0;
  NodeRef best;
  for (auto& l : loads) {
    int64_t b = bytes_read(l);
    if (moves_with(l->src[1], outer)) {
      outer_bytes = std::max(outer_bytes, b);
      continue;
    }
    for (size_t i = 1; i < g.size(); i++)
      if (moves_with(l->src[1], g[i]) && b > best_bytes) best = g[i], best_bytes = b;
  }
  if (!best || best_bytes < kSwapMinBytes || outer_bytes * 16 > best_bytes) return ast;
  NodeRef new_outer = ir::range_like(best, outer->arg[0], ir::kGlobalRange);
  NodeRef new_inner = ir::range_like(outer, best->arg[0], ir::kGlobalRange);
  log.push_back("SWAP " + std::to_string(outer->arg[1]) + "x" + std::to_string(best->arg[1]));
  return ir::simplify(ir::substitute(ast, {{outer.get(), new_inner}, {best.get(), new_outer}}));
}

}  // namespace kiln::codegen
