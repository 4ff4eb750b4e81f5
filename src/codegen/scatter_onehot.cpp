// One-hot sums over an output loop become scatter-adds (see scatter_onehot.h): out[v] = sum over r of
// where(e(r) == v, x(r, v), 0) runs once per r, adding x(r, e(r)) into out[e(r)], instead of once
// per (v, r) pair. An embedding's weight gradient is such a sum: vocabulary x tokens steps, where
// the scatter takes tokens steps.
#include "codegen/scatter_onehot.h"

#include <algorithm>
#include <unordered_map>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

Scatter scatter_onehot_sums(const NodeRef& ast, Target target, std::vector<std::string>& log) {
  Scatter out{ast};
  // one output, whose value is one sum of floats, with no other sum in the kernel
  if (ast->op != Op::SINK || ast->src.size() != 1 || ast->src[0]->op != Op::STORE) return out;
  const NodeRef& store = ast->src[0];
  const NodeRef& red = store->src[2];
  if (red->op != Op::REDUCE || red->arg[0] != static_cast<int64_t>(Op::ADD) ||
      (red->dtype != DType::F32 && red->dtype != DType::F64))
    return out;
  std::vector<NodeRef> globals;
  for (auto& n : ir::toposort({ast})) {
    if (n->op == Op::REDUCE && n != red) return out;
    if (n->op == Op::RANGE && n->arg[2] == ir::kGlobalRange) globals.push_back(n);
  }
  // the output is zeroed first, by a count of elements known before the launch
  for (const NodeRef& g : globals)
    if (ir::is_symbolic_range(*g)) return out;
  std::sort(globals.begin(), globals.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  for (const NodeRef& v : globals) {
    NodeRef index;
    NodeRef body = select_onehot(red->src[0], v, &index);
    // the selected index must move with the sum's loops (else it is one output, not a scatter)
    if (!body) continue;
    bool moves = false;
    for (size_t k = 1; k < red->src.size(); k++) moves |= ir::reaches(index, red->src[k].get());
    if (!moves) continue;
    // the sum's loops become output loops: on the GPU outside the others (neighbouring threads add
    // into neighbouring elements), on the CPU inside them (the outermost loop, split over threads,
    // is then an output loop whose elements no other thread adds into)
    int64_t lo = 0, hi = 0;
    for (auto& n : ir::toposort({ast}))
      if (n->op == Op::RANGE) lo = std::min(lo, n->arg[0]), hi = std::max(hi, n->arg[0]);
    std::unordered_map<const Node*, NodeRef> subs;
    int64_t elems = 1;
    for (auto& g : globals) elems *= g->arg[1];
    for (size_t k = 1; k < red->src.size(); k++) {
      int64_t id = target == Target::CUDA
                       ? lo - static_cast<int64_t>(red->src.size()) + static_cast<int64_t>(k)
                       : hi + static_cast<int64_t>(k);
      subs[red->src[k].get()] = ir::range_like(red->src[k], id, ir::kGlobalRange);
    }
    NodeRef val = ir::substitute(body, subs);
    NodeRef idx = ir::substitute(store->src[1], {{v.get(), ir::substitute(index, subs)}});
    NodeRef add = ir::make(Op::STORE, store->dtype, store->shape, {store->src[0], idx, val}, {1});
    out.ast = ir::simplify(ir::make(Op::SINK, ast->dtype, ast->shape, {add}, ast->arg));
    out.zero_elems = elems;
    // with no other output loop, the outermost loop is the sum's: threads would add into one element
    out.serial = globals.size() == 1;
    log.push_back("SCATTER_ONEHOT " + std::to_string(v->arg[1]));
    return out;
  }
  return out;
}

}  // namespace kiln::codegen
