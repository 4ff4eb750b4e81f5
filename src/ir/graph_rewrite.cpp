// Tensor-graph rewrite passes (see graph_rewrite.h).
#include "ir/graph_rewrite.h"

#include <atomic>
#include <cmath>
#include <iostream>
#include <iterator>

#include "ir/scalar_alu.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

bool all_const(const NodeRef& n) {
  for (auto& s : n->src)
    if (s->op != Op::CONST) return false;
  return !n->src.empty();
}

bool realized(const NodeRef& n) { return n->op == Op::BUFFER || n->buffer; }

// the composites' rules the frontend registers (set_lowering), by op
std::atomic<Lowering> lowerings[static_cast<int>(Op::COUNT_)];

NodeRef lower_special(const NodeRef& n) {
  Lowering lower = lowerings[static_cast<int>(n->op)].load();
  return lower ? lower(n) : nullptr;
}

}  // namespace

const RuleSet& fold_constants_rules() {
  static const RuleSet rules = [] {
    RuleSet r("fold_constants");
    // an elementwise op of constants is a constant: evaluated once by the interpreter's scalar ALU
    Rule fold = [](const NodeRef& n) -> NodeRef {
      if (!all_const(n) || realized(n) || n->op == Op::BITCAST) return nullptr;
      // x * recip(c) renders as the division x / c; keep it unless 1/c is exact (c a power of two)
      if (n->op == Op::RECIP && is_float(n->dtype)) {
        int e;
        if (std::frexp(n->src[0]->fval, &e) != 0.5) return nullptr;
      }
      std::vector<DType> types;
      std::vector<Scalar> src;
      for (auto& s : n->src) {
        types.push_back(s->dtype);
        src.push_back(is_float(s->dtype) ? Scalar{s->dtype, s->fval, 0}
                                         : Scalar{s->dtype, 0, wrap_int(s->ival(), s->dtype)});
      }
      Scalar v;
      const char* why = alu_type_error(n->op, n->dtype, types);
      if (!why) why = eval_alu(n->op, n->dtype, src, v);
      if (why) throw Error(std::string("constant folding: ") + why + " in " + n->str());
      if (is_float(n->dtype)) return const_float(v.f, n->dtype, n->shape);
      return const_int(v.i, n->dtype, n->shape);
    };
    for (int op = 0; op < static_cast<int>(Op::COUNT_); op++)
      if (is_elementwise(static_cast<Op>(op))) r.on(static_cast<Op>(op), fold);
    return r;
  }();
  return rules;
}

const RuleSet& algebraic_rules() {
  static const RuleSet rules = [] {
    RuleSet r("algebraic");
    auto same_type = [](const NodeRef& a, const NodeRef& n) {
      return a->dtype == n->dtype && a->shape == n->shape;
    };
    r.on(Op::MUL, [=](const NodeRef& n) -> NodeRef {
      for (int k = 0; k < 2; k++) {
        const NodeRef &c = n->src[k], &x = n->src[1 - k];
        if (is_const_value(c, 1) && same_type(x, n)) return x;
        // x*0 -> 0 only where exact: NaN*0 and inf*0 are NaN for floats
        if (is_const_value(c, 0) && (!is_float(n->dtype) || settings().fast_math)) return c;
      }
      return nullptr;
    });
    r.on(Op::ADD, [=](const NodeRef& n) -> NodeRef {
      for (int k = 0; k < 2; k++)
        if (is_const_value(n->src[k], 0) && same_type(n->src[1 - k], n)) return n->src[1 - k];
      return nullptr;
    });
    r.on(Op::CAST, [](const NodeRef& n) -> NodeRef {
      if (n->src[0]->dtype == n->dtype) return n->src[0];
      // x widened to a larger float type, viewed, and cast back to x's type is the view of x (an
      // autocast operand's round trip: bf16 -> f32 -> bf16 loses nothing)
      std::vector<NodeRef> views;
      NodeRef w = n->src[0];
      while (w->op == Op::EXPAND || w->op == Op::RESHAPE || w->op == Op::PERMUTE || w->op == Op::SHRINK)
        views.push_back(w), w = w->src[0];
      if (w->op != Op::CAST || w->src[0]->dtype != n->dtype || !is_float(n->dtype) || !is_float(w->dtype) ||
          dtype_size(w->dtype) <= dtype_size(n->dtype))
        return nullptr;
      NodeRef x = w->src[0];
      for (auto it = views.rbegin(); it != views.rend(); ++it) x = remake_view(*it, x, n->dtype);
      return x;
    });
    r.on(Op::WHERE, [](const NodeRef& n) -> NodeRef {
      if (n->src[1] == n->src[2]) return n->src[1];
      if (n->src[0]->op == Op::CONST) return n->src[0]->ival() ? n->src[1] : n->src[2];
      return nullptr;
    });
    return r;
  }();
  return rules;
}

const RuleSet& movement_rules() {
  static const RuleSet rules = [] {
    RuleSet r("movement");
    // any view of a constant is a constant of the new shape (PAD excepted: it adds zeros)
    Rule view_of_const = [](const NodeRef& n) -> NodeRef {
      if (n->src[0]->op != Op::CONST) return nullptr;
      if (!n->sym.empty())  // keeps its symbolic dims: the loops of a kernel that stores it
        return make_sym(Op::CONST, n->dtype, n->shape, {}, n->src[0]->arg, n->sym, n->src[0]->fval);
      return make(Op::CONST, n->dtype, n->shape, {}, n->src[0]->arg, n->src[0]->fval);
    };
    Rule no_op = [](const NodeRef& n) -> NodeRef {
      return n->shape == n->src[0]->shape && n->sym == n->src[0]->sym && n->op != Op::PERMUTE &&
                     n->op != Op::FLIP
                 ? n->src[0]
                 : nullptr;
    };
    r.on({Op::RESHAPE, Op::EXPAND, Op::PERMUTE, Op::SHRINK, Op::FLIP}, view_of_const);
    r.on({Op::RESHAPE, Op::EXPAND, Op::SHRINK, Op::PAD}, no_op);
    r.on(Op::RESHAPE, [](const NodeRef& n) -> NodeRef {
      if (n->src[0]->op != Op::RESHAPE || introduces_sym(n->src[0])) return nullptr;
      return make(Op::RESHAPE, n->dtype, n->shape, {n->src[0]->src[0]});
    });
    r.on(Op::PERMUTE, [](const NodeRef& n) -> NodeRef {
      std::vector<int64_t> perm = n->arg;
      NodeRef x = n->src[0];
      if (x->op == Op::PERMUTE) {  // out dim i is x's dim perm[i], which is x->src's dim x->arg[perm[i]]
        for (auto& p : perm) p = x->arg[static_cast<size_t>(p)];
        x = x->src[0];
      }
      bool identity = true;
      for (size_t i = 0; i < perm.size(); i++) identity &= perm[i] == static_cast<int64_t>(i);
      if (identity) return x;
      if (x == n->src[0]) return nullptr;
      return make(Op::PERMUTE, n->dtype, n->shape, {x}, perm);
    });
    // a cast of a permuted view is the view of the cast: realized, the cast keeps its source's layout
    // (a bf16 copy of a transposed weight is a plain copy, and the matmul reads it transposed)
    r.on(Op::CAST, [](const NodeRef& n) -> NodeRef {
      const NodeRef& p = n->src[0];
      if (p->op != Op::PERMUTE) return nullptr;
      NodeRef c = make(Op::CAST, n->dtype, p->src[0]->shape, {p->src[0]});
      return make(Op::PERMUTE, n->dtype, n->shape, {c}, p->arg);
    });
    // attention and layer norm that no kernel computes are their composites: lowered here, in the
    // first pass, so the passes after see their matmuls and reduces, and again wherever a later
    // movement pass uncovers one below a realized view; so is an INDEX_COPY that cannot write in place
    r.on(Op::ATTENTION, lower_special);
    r.on(Op::LAYER_NORM, lower_special);
    r.on(Op::INDEX_COPY, lower_special);
    // DETACH only matters to autograd, which has run by now
    r.on(Op::DETACH, [](const NodeRef& n) -> NodeRef { return n->src[0]; });
    // contiguous() of a buffer is the buffer itself (buffers are contiguous)
    r.on(Op::CONTIGUOUS,
         [](const NodeRef& n) -> NodeRef { return realized(n->src[0]) ? n->src[0] : nullptr; });
    r.on(Op::FLIP, [](const NodeRef& n) -> NodeRef {
      for (auto f : n->arg)
        if (f) return nullptr;
      return n->src[0];
    });
    return r;
  }();
  return rules;
}

void set_lowering(Op op, Lowering lower) { lowerings[static_cast<int>(op)].store(lower); }

std::vector<NodeRef> rewrite_graph(const std::vector<NodeRef>& roots) {
  std::vector<NodeRef> cur = roots;
  const RuleSet* passes[] = {&movement_rules(), &algebraic_rules(), &fold_constants_rules(),
                             &movement_rules(), &algebraic_rules()};
  for (size_t i = 0; i < std::size(passes); i++) {
    // the second movement and algebraic passes only matter after a change: the graph is at a fixed
    // point of both otherwise (the same roots mean no node under them changed)
    if (i == 3 && cur == roots) break;
    cur = rewrite(cur, *passes[i]);
    if (settings().debug >= 6) std::cerr << "kiln: graph after " << passes[i]->name() << ":\n" << dump(cur);
  }
  return cur;
}

}  // namespace kiln::ir
