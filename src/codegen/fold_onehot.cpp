// One-hot sums become indexed loads: a sum over a loop r of where(r == e && rest, v(r), 0), with e
// free of r, is where(0 <= e < n && rest, v(e), 0). gather, embedding lookups and the target term
// of cross-entropy are written as such sums; folded, they read one element instead of a whole row.
#include <optional>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

bool uses(const NodeRef& n, const Node* r) {
  for (auto& x : ir::toposort({n}))
    if (x.get() == r) return true;
  return false;
}

bool is_true(const NodeRef& n) { return n->is_const() && n->dtype == DType::Bool && n->ival() == 1; }

// e when c is `r == e`, written (as the frontend does) `(r != e) xor true`, with e free of r.
NodeRef equal_to(const NodeRef& c, const NodeRef& r) {
  if (c->op != Op::XOR) return nullptr;
  for (int i = 0; i < 2; i++) {
    const NodeRef &ne = c->src[i], &t = c->src[1 - i];
    if (ne->op != Op::CMPNE || !is_true(t)) continue;
    for (int j = 0; j < 2; j++)
      if (ne->src[j] == r && !uses(ne->src[1 - j], r.get())) return ne->src[1 - j];
  }
  return nullptr;
}

struct Match {
  NodeRef e;     // the index r equals
  NodeRef rest;  // the other conjuncts (nullptr: none)
};

// A conjunct `r == e` of the condition c.
std::optional<Match> find_equal(const NodeRef& c, const NodeRef& r) {
  if (NodeRef e = equal_to(c, r)) return Match{e, nullptr};
  if (c->op == Op::AND)
    for (int i = 0; i < 2; i++)
      if (auto m = find_equal(c->src[i], r)) return Match{m->e, ir::land(m->rest, c->src[1 - i])};
  return std::nullopt;
}

// The value of sum over r of `body`, when body is a one-hot selection along r (possibly scaled by
// factors free of r, or cast); nullptr otherwise.
NodeRef fold(const NodeRef& body, const NodeRef& r) {
  switch (body->op) {
    case Op::WHERE: {
      if (!ir::is_const_value(body->src[2], 0)) return nullptr;
      auto m = find_equal(body->src[0], r);
      if (!m) return nullptr;
      DType t = m->e->dtype;
      NodeRef inside = ir::land(
          ir::alu(Op::XOR, ir::alu(Op::CMPLT, m->e, ir::const_int(0, t)), ir::const_int(1, DType::Bool)),
          ir::alu(Op::CMPLT, m->e, ir::const_int(r->arg[1], t)));
      // the index is kept in range even where the selection is off: both sides of a WHERE run
      NodeRef idx = ir::make(Op::WHERE, t, {}, {inside, m->e, ir::const_int(0, t)});
      std::unordered_map<const Node*, NodeRef> at{{r.get(), idx}};
      NodeRef cond = ir::land(inside, m->rest ? ir::substitute(m->rest, at) : nullptr);
      return ir::make(Op::WHERE, body->dtype, body->shape,
                      {cond, ir::substitute(body->src[1], at), body->src[2]});
    }
    case Op::MUL:
      for (int i = 0; i < 2; i++)
        if (!uses(body->src[1 - i], r.get()))
          if (NodeRef f = fold(body->src[i], r))
            return i == 0 ? ir::alu(Op::MUL, f, body->src[1]) : ir::alu(Op::MUL, body->src[0], f);
      return nullptr;
    case Op::CAST:
      if (NodeRef f = fold(body->src[0], r))
        return ir::make(Op::CAST, body->dtype, body->shape, {f}, body->arg);
      return nullptr;
    default: return nullptr;
  }
}

}  // namespace

NodeRef fold_onehot_sums(const NodeRef& ast, std::vector<std::string>& log) {
  NodeRef cur = ast;
  for (bool folded = true; folded;) {
    folded = false;
    for (auto& n : ir::toposort({cur})) {
      if (n->op != Op::REDUCE || n->arg[0] != static_cast<int64_t>(Op::ADD)) continue;
      for (size_t k = 1; k < n->src.size() && !folded; k++) {
        NodeRef body = fold(n->src[0], n->src[k]);
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
