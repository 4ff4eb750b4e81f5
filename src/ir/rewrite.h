// Pattern-rule rewrite engine: rules indexed by op, applied bottom-up to a fixed point.
// Every graph pass and the symbolic simplifier are rule sets run by this engine.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/node.h"

namespace kiln::ir {

// A rule looks at one node (whose sources are already rewritten) and returns a replacement,
// or nullptr when it does not match.
using Rule = std::function<NodeRef(const NodeRef&)>;

class RuleSet {
 public:
  explicit RuleSet(std::string name) : name_(std::move(name)) {}
  RuleSet& on(Op op, Rule r) {
    by_op_[static_cast<int>(op)].push_back(std::move(r));
    return *this;
  }
  RuleSet& on(std::initializer_list<Op> ops, const Rule& r) {
    for (Op op : ops) on(op, r);
    return *this;
  }
  const std::vector<Rule>& rules_for(Op op) const { return by_op_[static_cast<int>(op)]; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::array<std::vector<Rule>, static_cast<int>(Op::COUNT_)> by_op_;
};

// Rewrites the graphs under roots with the rules until no rule matches anywhere.
class Rewriter {
 public:
  explicit Rewriter(const RuleSet& rules) : rules_(rules) {}
  NodeRef operator()(const NodeRef& n);
  std::vector<NodeRef> operator()(const std::vector<NodeRef>& roots);

 private:
  bool at_fixed_point(const Node* n) const;  // a result: rewrites to itself

  const RuleSet& rules_;
  std::unordered_map<const Node*, NodeRef> memo_;  // node -> its rewritten image
  std::vector<NodeRef> keep_;                      // keeps memo keys alive
};

NodeRef rewrite(const NodeRef& root, const RuleSet& rules);
std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RuleSet& rules);

// Replaces sources: returns n with src[i] replaced by new_src[i] (same node if unchanged).
NodeRef with_src(const NodeRef& n, std::vector<NodeRef> new_src);
// Substitutes nodes by identity (e.g. RANGE -> expression) throughout the graph under root.
NodeRef substitute(const NodeRef& root, const std::unordered_map<const Node*, NodeRef>& subs);

}  // namespace kiln::ir
