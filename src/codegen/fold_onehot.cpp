// One-hot sums become indexed loads: a sum over a loop r of where(r == e && rest, v(r), 0), with e
// free of r, is where(0 <= e < n && rest, v(e), 0). gather, embedding lookups and the target term
// of cross-entropy are written as such sums; folded, they read one element instead of a whole row.
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

bool is_true(const NodeRef& n) { return n->is_const() && n->dtype == DType::Bool && n->ival() == 1; }

// e when c is `r == e`, written (as the frontend does) `(r != e) xor true`, with e free of r.
NodeRef equal_to(const NodeRef& c, const NodeRef& r) {
  if (c->op != Op::XOR) return nullptr;
  for (int i = 0; i < 2; i++) {
    const NodeRef &ne = c->src[i], &t = c->src[1 - i];
    if (ne->op != Op::CMPNE || !is_true(t)) continue;
    for (int j = 0; j < 2; j++)
      if (ne->src[j] == r && !ir::reaches(ne->src[1 - j], r.get())) return ne->src[1 - j];
  }
  return nullptr;
}

struct Match {
  NodeRef e;     // the index r equals
  NodeRef rest;  // the other conjuncts (nullptr: none)
};

// A conjunct `r == e` of the condition c, found depth first through its ANDs (left first) with an
// explicit stack. `rest` joins the other conjuncts innermost first.
std::optional<Match> find_equal(const NodeRef& c, const NodeRef& r) {
  struct Step {
    NodeRef x, sibling;  // sibling: the other side of the AND whose source x is
    int parent;
  };
  std::vector<Step> steps{{c, nullptr, -1}};
  std::vector<int> todo{0};
  while (!todo.empty()) {
    int k = todo.back();
    todo.pop_back();
    NodeRef x = steps[static_cast<size_t>(k)].x;
    if (NodeRef e = equal_to(x, r)) {
      NodeRef rest;
      for (int j = k; steps[static_cast<size_t>(j)].parent >= 0; j = steps[static_cast<size_t>(j)].parent)
        rest = ir::land(rest, steps[static_cast<size_t>(j)].sibling);
      return Match{e, rest};
    }
    if (x->op != Op::AND) continue;
    for (int i = 1; i >= 0; i--) {
      steps.push_back({x->src[static_cast<size_t>(i)], x->src[static_cast<size_t>(1 - i)], k});
      todo.push_back(static_cast<int>(steps.size()) - 1);
    }
  }
  return std::nullopt;
}

// The one-hot selection at the bottom of body, rewritten to the selected element; *index gets the
// index selected, kept in range.
NodeRef fold_where(const NodeRef& body, const NodeRef& r, NodeRef* index) {
  if (!ir::is_const_value(body->src[2], 0)) return nullptr;
  auto m = find_equal(body->src[0], r);
  if (!m) return nullptr;
  DType t = m->e->dtype;
  NodeRef inside =
      ir::land(ir::alu(Op::XOR, ir::alu(Op::CMPLT, m->e, ir::const_int(0, t)), ir::const_int(1, DType::Bool)),
               ir::alu(Op::CMPLT, m->e, ir::const_int(r->arg[1], t)));
  // the index is kept in range even where the selection is off: both sides of a WHERE run
  NodeRef idx = ir::make(Op::WHERE, t, {}, {inside, m->e, ir::const_int(0, t)});
  if (index) *index = idx;
  std::unordered_map<const Node*, NodeRef> at{{r.get(), idx}};
  NodeRef cond = ir::land(inside, m->rest ? ir::substitute(m->rest, at) : nullptr);
  return ir::make(Op::WHERE, body->dtype, body->shape,
                  {cond, ir::substitute(body->src[1], at), body->src[2]});
}

}  // namespace

// Only one path can lead to the selection (the side of a product that uses r, when the other does
// not), walked down and rebuilt with a loop.
NodeRef select_onehot(const NodeRef& body, const NodeRef& r, NodeRef* index) {
  std::vector<std::pair<NodeRef, size_t>> path;  // the products and casts above, and the side taken
  NodeRef x = body;
  while (x->op == Op::MUL || x->op == Op::CAST) {
    size_t side = 0;
    if (x->op == Op::MUL) {
      if (!ir::reaches(x->src[1], r.get()) && ir::reaches(x->src[0], r.get()))
        side = 0;
      else if (!ir::reaches(x->src[0], r.get()) && ir::reaches(x->src[1], r.get()))
        side = 1;
      else
        return nullptr;
    }
    path.emplace_back(x, side);
    x = x->src[side];
  }
  if (x->op != Op::WHERE) return nullptr;
  NodeRef f = fold_where(x, r, index);
  for (auto it = path.rbegin(); f && it != path.rend(); ++it) {
    const auto& [n, side] = *it;
    if (n->op == Op::CAST)
      f = ir::make(Op::CAST, n->dtype, n->shape, {f}, n->arg);
    else
      f = side == 0 ? ir::alu(Op::MUL, f, n->src[1]) : ir::alu(Op::MUL, n->src[0], f);
  }
  return f;
}

NodeRef fold_onehot_sums(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool folded = true; folded;) {
    folded = false;
    for (auto& n : ir::toposort({cur})) {
      if (n->op != Op::REDUCE || n->arg[0] != static_cast<int64_t>(Op::ADD)) continue;
      for (size_t k = 1; k < n->src.size() && !folded; k++) {
        if (ir::is_symbolic_range(*n->src[k])) continue;  // its bound is the loop's trip count
        NodeRef body = select_onehot(n->src[0], n->src[k]);
        if (!body) continue;
        std::vector<NodeRef> src{body};
        for (size_t j = 1; j < n->src.size(); j++)
          if (j != k) src.push_back(n->src[j]);
        NodeRef repl = src.size() == 1 ? body : ir::make(Op::REDUCE, n->dtype, n->shape, src, n->arg);
        cur = ir::simplify(ir::substitute(cur, {{n.get(), repl}}));
        log.push_back("FOLD_ONEHOT " + std::to_string(n->src[k]->arg[1]));
        folded = true;
      }
      if (folded) break;
    }
  }
  return cur;
}

}  // namespace kiln::codegen
