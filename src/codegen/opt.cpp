// Kernel optimizations on the AST: loop collapsing and reduce-loop merging.
#include "codegen/opt.h"

#include <algorithm>
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

std::vector<NodeRef> ranges_of(const NodeRef& ast, bool reduce) {
  std::vector<NodeRef> r;
  for (auto& n : ir::toposort({ast}))
    if (n->op == Op::RANGE && (n->arg[2] != 0) == reduce) r.push_back(n);
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
    auto g = ranges_of(cur, false);
    int64_t cost = index_cost(cur);
    for (size_t i = 0; i + 1 < g.size() && !merged; i++) {
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

NodeRef merge_reduces(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool merged = true; merged;) {
    merged = false;
    std::vector<NodeRef> reds;
    for (auto& n : ir::toposort({cur}))
      if (n->op == Op::REDUCE) reds.push_back(n);
    for (size_t i = 0; i < reds.size() && !merged; i++)
      for (size_t j = i + 1; j < reds.size() && !merged; j++) {
        auto &a = reds[i], &b = reds[j];
        if (a->src.size() != b->src.size()) continue;
        bool same_sizes = true, same_ranges = true;
        for (size_t k = 1; k < a->src.size(); k++) {
          same_sizes &= a->src[k]->arg[1] == b->src[k]->arg[1];
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
  for (bool reduce : {false, true})
    for (auto& r : ranges_of(ast, reduce)) subs[r.get()] = ir::range(1000000 + id++, r->arg[1], reduce);
  NodeRef tmp = ir::substitute(ast, subs);
  subs.clear();
  for (bool reduce : {false, true})
    for (auto& r : ranges_of(tmp, reduce)) subs[r.get()] = ir::range(r->arg[0] - 1000000, r->arg[1], reduce);
  return ir::substitute(tmp, subs);
}

}  // namespace kiln::codegen
