// DOT (CPU): a sum whose loads all step by one element along its innermost loop (dot products of
// contiguous rows: x @ w.T with few rows of x, a decoding step's matrix-vector products) gets that
// loop split into vector lanes and an output loop into unrolled lanes (see opt.h).
#include <algorithm>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

NodeRef dot_lanes(const NodeRef& ast, int vector_bytes, std::vector<std::string>& log) {
  std::vector<NodeRef> reduces, g;
  int64_t uid = 0;
  for (auto& n : ir::toposort({ast})) {
    if (n->op == Op::REDUCE) reduces.push_back(n);
    if (n->op == Op::RANGE) {
      uid = std::max(uid, n->arg[0] + 1);
      // register tiles (UPCAST) or a packed operand (PACK) already shape this kernel
      if (n->arg[2] == ir::kUpcastRange || n->arg[2] == ir::kPackRange) return ast;
      if (n->arg[2] == ir::kGlobalRange) g.push_back(n);
    }
  }
  if (reduces.size() != 1) return ast;
  const NodeRef& red = reduces[0];
  if (static_cast<Op>(red->arg[0]) != Op::ADD || (red->dtype != DType::F32 && red->dtype != DType::F64))
    return ast;
  const NodeRef& k = red->src.back();
  const int64_t v = vector_bytes / dtype_size(red->dtype);
  if (ir::is_symbolic_range(*k) || v < 2 || k->arg[1] % v != 0 || k->arg[1] < kDotMinVectors * v) return ast;
  // every load that moves with k steps by one element (so the lanes read whole vectors), and one does
  bool any = false;
  for (auto& x : ir::toposort({red->src[0]})) any |= x->op == Op::LOAD && moves_with(x, k);
  if (!any || !unit_stride({red->src[0]}, k, Op::LOAD)) return ast;
  // the sum moves with every output loop (one broadcast over a loop, a row's sum subtracted from
  // the row, is computed once per row before that loop, which lanes would prevent)
  for (auto& r : g)
    if (!moves_with(red->src[0], r)) return ast;
  // rows: the innermost output loop whose size kDotRows or a smaller power of two divides, else the
  // innermost one, padded to a multiple of kDotRows (each row's accumulators are independent chains of
  // fused multiply-adds; the loads that do not move with the rows are shared by them)
  std::sort(g.begin(), g.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  NodeRef rows;
  int64_t nrows = 1;
  for (size_t i = g.size(); i-- > 0 && !rows;) {
    if (ir::is_symbolic_range(*g[i])) continue;
    for (int64_t c = kDotRows; c >= 2 && !rows; c /= 2)
      if (g[i]->arg[1] % c == 0) rows = g[i], nrows = c;
  }
  bool padded = false;
  if (!rows && !g.empty() && !ir::is_symbolic_range(*g.back()) && g.back()->arg[1] > kDotRows)
    rows = g.back(), nrows = kDotRows, padded = true;
  // k = outer * v + lane: the lane is one of the sum's own loops (linearize keeps an accumulator per
  // lane and adds the lanes up after the loop)
  NodeRef outer = ir::range(k->arg[0], k->arg[1] / v, true);
  NodeRef lane = ir::range_of_kind(uid + 1, v, ir::kUpcastRange);
  std::unordered_map<const ir::Node*, NodeRef> subs{{k.get(), outer * v + lane}};
  std::vector<NodeRef> src{ir::substitute(red->src[0], subs)};
  src.insert(src.end(), red->src.begin() + 1, red->src.end() - 1);
  src.insert(src.end(), {outer, lane});
  NodeRef cur =
      ir::substitute(ast, {{red.get(), ir::make(Op::REDUCE, red->dtype, red->shape, src, red->arg)}});
  log.push_back("DOT " + std::to_string(v));
  if (!rows) return ir::simplify(cur);
  const int64_t n = rows->arg[1];
  NodeRef r_outer = ir::range_of_kind(rows->arg[0], (n + nrows - 1) / nrows, ir::kGlobalRange);
  NodeRef r_lane = ir::range_of_kind(uid, nrows, ir::kUpcastRange), row = r_outer * nrows + r_lane;
  log.push_back("UPCAST " + std::to_string(nrows));
  if (!padded) return ir::simplify(ir::substitute(cur, {{rows.get(), row}}));
  // the rows past the end read the last row again (a load at a clamped index stays a plain vector
  // load, where a masked one would not) and store nothing
  NodeRef inside = ir::lt(row, n);
  NodeRef clamped = ir::make(Op::WHERE, DType::I64, {}, {inside, row, ir::const_int(n - 1)});
  cur = ir::substitute(cur, {{rows.get(), clamped}});
  std::vector<NodeRef> stores;
  for (auto& st : cur->src) {
    if (st->op != Op::STORE || !moves_with(st, r_lane)) {
      stores.push_back(st);
      continue;
    }
    std::vector<NodeRef> ssrc(st->src.begin(), st->src.begin() + 3);
    ssrc.push_back(ir::land(st->src.size() > 3 ? st->src[3] : nullptr, inside));
    stores.push_back(ir::make(Op::STORE, st->dtype, st->shape, ssrc, st->arg));
  }
  log.push_back("PAD_ROWS " + std::to_string(n) + "->" + std::to_string(r_outer->arg[1] * nrows));
  return ir::simplify(ir::make(cur->op, cur->dtype, cur->shape, stores, cur->arg));
}

}  // namespace kiln::codegen
