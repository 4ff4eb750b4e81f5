// Kernel optimizations on the AST: loop collapsing and reduce-loop merging.
#include "codegen/opt.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

std::vector<NodeRef> ranges_of(const NodeRef& ast, int64_t kind) {
  std::vector<NodeRef> r;
  for (auto& n : ir::toposort({ast}))
    if (n->op == Op::RANGE && n->arg[2] == kind) r.push_back(n);
  std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  return r;
}

int64_t index_cost(const NodeRef& ast) {
  int64_t c = 0;
  for (auto& n : ir::toposort({ast})) c += n->op == Op::IDIV || n->op == Op::MOD;
  return c;
}

bool depends_on(const NodeRef& n, const std::unordered_set<const Node*>& targets) {
  for (auto& x : ir::toposort({n}))
    if (targets.count(x.get())) return true;
  return false;
}

}  // namespace

NodeRef collapse_loops(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool merged = true; merged;) {
    merged = false;
    auto g = ranges_of(cur, ir::kGlobalRange);
    int64_t cost = index_cost(cur);
    for (size_t i = 0; i + 1 < g.size() && !merged; i++) {
      if (ir::is_symbolic_range(*g[i]) || ir::is_symbolic_range(*g[i + 1])) continue;
      int64_t a = g[i]->arg[1], b = g[i + 1]->arg[1];
      NodeRef flat = ir::range(g[i]->arg[0], a * b, false);
      NodeRef cand = ir::simplify(
          ir::substitute(cur, {{g[i].get(), ir::idiv(flat, b)}, {g[i + 1].get(), ir::mod(flat, b)}}));
      if (index_cost(cand) <= cost) {
        log.push_back("COLLAPSE " + std::to_string(a) + "x" + std::to_string(b));
        cur = cand;
        merged = true;
      }
    }
  }
  return cur;
}

namespace {

int64_t fresh_range_id(const std::vector<NodeRef>& order) {
  int64_t id = 0;
  for (auto& n : order)
    if (n->op == Op::RANGE) id = std::max(id, n->arg[0] + 1);
  return id;
}

// The divisors c of loop r's size that its indices divide it by (r / c, r % c), 1 < c < size.
std::vector<int64_t> divisors_used(const std::vector<NodeRef>& order, const NodeRef& r) {
  std::vector<int64_t> out;
  if (ir::is_symbolic_range(*r)) return out;  // its trip count is not its size
  for (auto& n : order)
    if ((n->op == Op::IDIV || n->op == Op::MOD) && n->src[0] == r && n->src[1]->is_const()) {
      int64_t c = n->src[1]->ival();
      if (c > 1 && c < r->arg[1] && r->arg[1] % c == 0) out.push_back(c);
    }
  return out;
}

// cur with reduce red's loops [k, k + n) replaced by `loops`, and `subs` (the old loops' values in
// the new ones) applied to its body; simplified.
NodeRef with_reduce_loops(const NodeRef& cur, const NodeRef& red, size_t k, size_t n,
                          const std::vector<NodeRef>& loops,
                          const std::unordered_map<const Node*, NodeRef>& subs) {
  std::vector<NodeRef> src{ir::substitute(red->src[0], subs)};
  src.insert(src.end(), red->src.begin() + 1, red->src.begin() + static_cast<long>(k));
  src.insert(src.end(), loops.begin(), loops.end());
  src.insert(src.end(), red->src.begin() + static_cast<long>(k + n), red->src.end());
  return ir::simplify(
      ir::substitute(cur, {{red.get(), ir::make(Op::REDUCE, red->dtype, red->shape, src, red->arg)}}));
}

}  // namespace

NodeRef split_reduce_loops(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool split = true; split;) {
    split = false;
    std::vector<NodeRef> order = ir::toposort({cur});
    int64_t cost = index_cost(cur), fresh = fresh_range_id(order);
    auto take = [&](const NodeRef& cand, const std::string& what) {
      if (index_cost(cand) >= cost) return false;
      log.push_back(what);
      cur = cand;
      return split = true;
    };
    for (auto& red : order) {
      if (red->op != Op::REDUCE) continue;
      for (size_t k = 1; k < red->src.size() && !split; k++) {
        const NodeRef& r = red->src[k];
        for (int64_t c : divisors_used(order, r)) {
          NodeRef outer = ir::range(fresh, r->arg[1] / c, true), inner = ir::range(fresh + 1, c, true);
          if (take(with_reduce_loops(cur, red, k, 1, {outer, inner}, {{r.get(), outer * c + inner}}),
                   "SPLIT_REDUCE " + std::to_string(r->arg[1] / c) + "x" + std::to_string(c)))
            break;
        }
      }
      if (split) break;
    }
    // the innermost output loop likewise (its inner part stays innermost)
    auto g = ranges_of(cur, ir::kGlobalRange);
    if (split || g.empty()) continue;
    const NodeRef& r = g.back();
    for (int64_t c : divisors_used(order, r)) {
      NodeRef outer = ir::range_of_kind(r->arg[0], r->arg[1] / c, ir::kGlobalRange);
      NodeRef inner = ir::range_of_kind(fresh, c, ir::kGlobalRange);
      if (take(ir::simplify(ir::substitute(cur, {{r.get(), outer * c + inner}})),
               "SPLIT " + std::to_string(r->arg[1] / c) + "x" + std::to_string(c)))
        break;
    }
  }
  return cur;
}

NodeRef collapse_reduce_loops(const NodeRef& ast, std::vector<std::string>& log, bool split_long_sums) {
  constexpr int64_t kFewOutputs = 65536, kLongSum = 4096;
  int64_t outputs = 1;
  for (auto& g : ranges_of(ast, ir::kGlobalRange)) outputs *= g->arg[1];
  NodeRef cur = ast;
  for (bool merged = true; merged;) {
    merged = false;
    std::vector<NodeRef> order = ir::toposort({cur});
    int64_t cost = index_cost(cur), fresh = fresh_range_id(order);
    for (auto& red : order) {
      if (red->op != Op::REDUCE) continue;
      for (size_t k = 1; k + 1 < red->src.size() && !merged; k++) {
        const NodeRef &a = red->src[k], &b = red->src[k + 1];
        if (ir::is_symbolic_range(*a) || ir::is_symbolic_range(*b)) continue;
        int64_t nb = b->arg[1];
        NodeRef flat = ir::range(fresh, a->arg[1] * nb, true);
        NodeRef cand = with_reduce_loops(cur, red, k, 2, {flat},
                                         {{a.get(), ir::idiv(flat, nb)}, {b.get(), ir::mod(flat, nb)}});
        bool worth_index_ops = split_long_sums && outputs <= kFewOutputs && a->arg[1] * nb >= kLongSum;
        if (index_cost(cand) <= cost || worth_index_ops) {
          log.push_back("COLLAPSE_REDUCE " + std::to_string(a->arg[1]) + "x" + std::to_string(nb));
          cur = cand;
          merged = true;
        }
      }
      if (merged) break;
    }
  }
  return cur;
}

NodeRef merge_reduces(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool merged = true; merged;) {
    merged = false;
    std::vector<NodeRef> reds;
    // only reduces with no reduce inside them (a row kernel nests a row's mean in its variance):
    // renaming the loops of one that holds another could make the two share a loop
    for (auto& n : ir::toposort({cur}))
      if (n->op == Op::REDUCE) {
        bool nested = false;
        for (auto& x : ir::toposort({n->src[0]})) nested |= x->op == Op::REDUCE;
        if (!nested) reds.push_back(n);
      }
    for (size_t i = 0; i < reds.size() && !merged; i++)
      for (size_t j = i + 1; j < reds.size() && !merged; j++) {
        auto &a = reds[i], &b = reds[j];
        if (a->src.size() != b->src.size()) continue;
        bool same_sizes = true, same_ranges = true;
        for (size_t k = 1; k < a->src.size(); k++) {
          same_sizes &= a->src[k]->arg[1] == b->src[k]->arg[1] && a->src[k]->src == b->src[k]->src;
          same_ranges &= a->src[k] == b->src[k];
        }
        if (!same_sizes || same_ranges) continue;
        if (depends_on(a, {b.get()}) || depends_on(b, {a.get()})) continue;
        std::unordered_map<const Node*, NodeRef> subs;
        for (size_t k = 1; k < a->src.size(); k++) subs[b->src[k].get()] = a->src[k];
        NodeRef nb = ir::substitute(b, subs);
        cur = ir::substitute(cur, {{b.get(), nb}});
        log.push_back("MERGE_REDUCE " + std::to_string(a->src.size() - 1) + " loops");
        merged = true;
      }
  }
  return cur;
}

NodeRef renumber_ranges(const NodeRef& ast) {
  std::unordered_map<const Node*, NodeRef> subs;
  int64_t id = 0;
  auto kind = [](const NodeRef& r) { return static_cast<ir::RangeKind>(r->arg[2]); };
  for (int64_t k : {ir::kGlobalRange, ir::kReduceRange, ir::kUpcastRange, ir::kPackRange})
    for (auto& r : ranges_of(ast, k)) subs[r.get()] = ir::range_like(r, 1000000 + id++, kind(r));
  NodeRef tmp = ir::substitute(ast, subs);
  subs.clear();
  for (int64_t k : {ir::kGlobalRange, ir::kReduceRange, ir::kUpcastRange, ir::kPackRange})
    for (auto& r : ranges_of(tmp, k)) subs[r.get()] = ir::range_like(r, r->arg[0] - 1000000, kind(r));
  return ir::substitute(tmp, subs);
}

bool moves_with(const NodeRef& n, const NodeRef& r) {
  for (auto& x : ir::toposort({n}))
    if (x == r) return true;
  return false;
}

// Whether every LOAD under `roots` whose index moves with range r moves by exactly one element.
bool unit_stride(const std::vector<NodeRef>& roots, const NodeRef& r, Op op) {
  for (auto& n : ir::toposort(roots)) {
    if (n->op != op) continue;
    const NodeRef& idx = n->src[1];
    NodeRef next = ir::substitute(idx, {{r.get(), r + 1}});
    if (next == idx) continue;  // does not move with r
    NodeRef step = ir::simplify(next + idx * -1);
    if (!step->is_const() || step->ival() != 1) return false;
  }
  return true;
}

namespace {

// The largest lane count of `choices` that divides n, or 0.
int64_t lanes_for(int64_t n, std::initializer_list<int64_t> choices) {
  for (int64_t k : choices)
    if (n % k == 0 && n >= k) return k;
  return 0;
}

bool reduce_moves_with(const std::vector<NodeRef>& reduces, const NodeRef& r) {
  for (auto& red : reduces)
    for (auto& x : ir::toposort({red->src[0]}))
      if (x == r) return true;
  return false;
}

}  // namespace

RegisterTile register_tile(int vector_bytes) {
  if (vector_bytes >= 64) return {16, 32};
  if (vector_bytes >= 32) return {8, 16};
  return {8, 8};
}

NodeRef upcast_reduce_output(const NodeRef& ast, RegisterTile tile, std::vector<std::string>& log) {
  std::vector<NodeRef> reduces;
  for (auto& n : ir::toposort({ast}))
    if (n->op == Op::REDUCE) reduces.push_back(n);
  auto g = ranges_of(ast, ir::kGlobalRange);
  if (reduces.empty() || g.empty() || !ranges_of(ast, ir::kUpcastRange).empty()) return ast;
  const NodeRef& last = g.back();
  if (ir::is_symbolic_range(*last)) return ast;
  // AVX-512's 32 lanes are two 16-float vectors: with 16 rows, 32 vector accumulators, what its
  // 32-register file holds (fewer lanes left the FMA units waiting on loads; bench/RESULTS.md)
  int64_t n = last->arg[1], k = lanes_for(n, {tile.cols, 16, 8, kMinTileCols});
  if (k == 0) return ast;
  // worth it when the lanes read consecutive elements inside the reduce and store consecutively
  if (!unit_stride(reduces, last, Op::LOAD) || !unit_stride({ast}, last, Op::STORE)) return ast;
  if (!reduce_moves_with(reduces, last)) return ast;
  int64_t uid = 1000;
  for (auto& x : ir::toposort({ast}))
    if (x->op == Op::RANGE) uid = std::max(uid, x->arg[0] + 1);
  NodeRef outer = ir::range_of_kind(last->arg[0], n / k, ir::kGlobalRange);
  NodeRef lane = ir::range_of_kind(uid + 1, k, ir::kUpcastRange);
  log.push_back("UPCAST " + std::to_string(k));
  std::unordered_map<const Node*, NodeRef> subs{{last.get(), outer * k + lane}};
  // a second lane over another output loop (rows of a matmul or convolution) that the reduce moves
  // with: a (k2 x k) tile, whose lanes share each other's loads (each row's operand is loaded once
  // for the k lanes, each column's vector once for the k2 rows). The innermost loop that no load
  // moving with the columns moves with (the rows, not a split part of the columns), else the next.
  if (g.size() >= 2) {
    std::vector<NodeRef> column_loads;
    for (auto& x : ir::toposort(reduces))
      if (x->op == Op::LOAD && moves_with(x, last)) column_loads.push_back(x);
    auto shares_loads = [&](const NodeRef& r) {
      return std::any_of(column_loads.begin(), column_loads.end(),
                         [&](const NodeRef& l) { return moves_with(l, r); });
    };
    // a loop a scratch is filled in (PACK) stays a loop: the scratch holds one step's copy
    std::vector<NodeRef> fills;
    for (auto& st : ast->src)
      for (auto& x : ir::toposort({st}))
        if (x->op == Op::RANGE && x->arg[2] == ir::kPackRange) {
          fills.push_back(st);
          break;
        }
    auto fills_in = [&](const NodeRef& r) {
      return std::any_of(fills.begin(), fills.end(), [&](const NodeRef& st) { return moves_with(st, r); });
    };
    NodeRef prev = g[g.size() - 2];
    for (size_t i = g.size() - 1; i-- > 0;)
      if (!ir::is_symbolic_range(*g[i]) && reduce_moves_with(reduces, g[i]) &&
          lanes_for(g[i]->arg[1], {tile.rows, 8, 4}) && !shares_loads(g[i]) && !fills_in(g[i])) {
        prev = g[i];
        break;
      }
    int64_t m = prev->arg[1], k2 = ir::is_symbolic_range(*prev) ? 0 : lanes_for(m, {tile.rows, 8, 4});
    if (k2 && reduce_moves_with(reduces, prev) && !fills_in(prev)) {
      NodeRef outer2 = ir::range_of_kind(prev->arg[0], m / k2, ir::kGlobalRange);
      NodeRef lane2 = ir::range_of_kind(uid, k2, ir::kUpcastRange);
      subs[prev.get()] = outer2 * k2 + lane2;
      log.push_back("UPCAST " + std::to_string(k2));
    }
  }
  return ir::simplify(ir::substitute(ast, subs));
}

}  // namespace kiln::codegen
