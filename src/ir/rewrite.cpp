// Bottom-up fixed-point rewriting with per-op rule lists.
#include "ir/rewrite.h"

namespace kiln::ir {

NodeRef with_src(const NodeRef& n, std::vector<NodeRef> new_src) {
  bool same = new_src.size() == n->src.size();
  for (size_t i = 0; same && i < new_src.size(); i++) same = new_src[i].get() == n->src[i].get();
  if (same) return n;
  // the same dims: symbolic ones stay so (a Tensor::symbolic mark over a rewritten source, say)
  NodeRef r = n->sym.empty()
                  ? make(n->op, n->dtype, n->shape, std::move(new_src), n->arg, n->fval)
                  : make_sym(n->op, n->dtype, n->shape, std::move(new_src), n->arg, n->sym, n->fval);
  if (n->op == Op::BUFFER) r->buffer = n->buffer;
  return r;
}

bool Rewriter::at_fixed_point(const Node* n) const {
  auto it = memo_.find(n);
  return it != memo_.end() && it->second.get() == n;
}

NodeRef Rewriter::operator()(const NodeRef& root) {
  // iterative post-order so deep graphs do not overflow the stack
  std::vector<std::pair<NodeRef, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    if (memo_.count(n.get())) {
      stack.pop_back();
      continue;
    }
    if (n->buffer) {  // realized: its value is computed already, so it is a leaf
      memo_[n.get()] = n;
      stack.pop_back();
      continue;
    }
    if (!expanded) {
      stack.back().second = true;
      for (auto& s : n->src)
        if (!memo_.count(s.get())) stack.push_back({s, false});
      continue;
    }
    stack.pop_back();
    bool same = true;
    for (auto& s : n->src) same &= memo_.at(s.get()).get() == s.get();
    NodeRef cur = n;
    if (!same) {
      std::vector<NodeRef> ns;
      ns.reserve(n->src.size());
      for (auto& s : n->src) ns.push_back(memo_.at(s.get()));
      cur = with_src(n, std::move(ns));
    }
    for (int guard = 0; guard < 1000; guard++) {
      NodeRef next;
      for (auto& rule : rules_.rules_for(cur->op))
        if ((next = rule(cur))) break;
      if (!next || next.get() == cur.get()) break;
      // the replacement may contain new nodes (or replaced old ones) whose sources need rewriting
      // too: rewritten here, with the same memo (the walk stops at nodes already rewritten)
      bool fresh_src = false;
      for (auto& s : next->src) fresh_src |= !at_fixed_point(s.get());
      cur = fresh_src ? (*this)(next) : next;
      if (fresh_src) break;
    }
    memo_[n.get()] = cur;
    memo_.emplace(cur.get(), cur);  // a result is at a fixed point: it rewrites to itself
    keep_.push_back(n);             // memo keys are raw pointers: keep rule outputs that are keys alive
  }
  return memo_.at(root.get());
}

std::vector<NodeRef> Rewriter::operator()(const std::vector<NodeRef>& roots) {
  std::vector<NodeRef> out;
  for (auto& r : roots) out.push_back((*this)(r));
  return out;
}

NodeRef rewrite(const NodeRef& root, const RuleSet& rules) { return Rewriter(rules)(root); }
std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RuleSet& rules) {
  return Rewriter(rules)(roots);
}

NodeRef substitute(const NodeRef& root, const std::unordered_map<const Node*, NodeRef>& subs) {
  // post-order over the nodes above the substituted ones (what lies below them is not walked); a
  // node none of whose sources changed is kept as it is
  std::unordered_map<const Node*, NodeRef> memo;
  std::vector<std::pair<const NodeRef*, size_t>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    const Node* node = n->get();
    if (i == 0 && memo.count(node)) {
      stack.pop_back();
      continue;
    }
    if (auto it = subs.find(node); it != subs.end()) {
      memo[node] = it->second;
      stack.pop_back();
      continue;
    }
    if (i < (*n)->src.size()) {
      const NodeRef* s = &(*n)->src[i++];
      if (!memo.count(s->get())) stack.push_back({s, 0});
      continue;
    }
    std::vector<NodeRef> ns;
    bool changed = false;
    for (auto& src : (*n)->src) {
      ns.push_back(memo.at(src.get()));
      changed |= ns.back() != src;
    }
    memo[node] = changed ? with_src(*n, std::move(ns)) : *n;
    stack.pop_back();
  }
  return memo.at(root.get());
}

}  // namespace kiln::ir
