// Symbolic dimensions (see symbolic.h).
#include "ir/symbolic.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <optional>

#include "ir/made_ops.h"
#include "ir/simplify.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

struct Names {
  std::mutex mu;
  std::unordered_map<int64_t, std::string> by_id;
};
Names& names() {
  static Names* n = new Names();  // never destroyed: nodes may outlive static destructors
  return *n;
}

// The value each variable was last given (Tensor::symbolic): what a reshape splitting a product of
// variables matches its new dims against. Only a guide: bind_vars checks every dim it derives.
struct Last {
  std::mutex mu;
  std::unordered_map<int64_t, int64_t> value;
};
Last& last() {
  static Last* l = new Last();
  return *l;
}

// The factors of a product expression, and their values where known.
void factors(const NodeRef& e, std::vector<NodeRef>& out) {
  if (e->op == Op::MUL && e->src.size() == 2) {
    factors(e->src[0], out);
    factors(e->src[1], out);
  } else {
    out.push_back(e);
  }
}
std::optional<int64_t> known_value(const NodeRef& e) {
  if (e->op == Op::CONST) return e->ival();
  if (e->op != Op::VAR) return std::nullopt;
  std::lock_guard<std::mutex> l(last().mu);
  auto it = last().value.find(e->arg[0]);
  if (it == last().value.end()) return std::nullopt;
  return it->second;
}

// A symbolic dim e of size `whole` split over dims `out` (their sizes): each takes consecutive
// factors of e whose values multiply to its size; empty when they do not. A product of one variable
// and constants gives the variable's value in this graph (solve_var); only a product of several
// variables falls back on the values they were last given.
std::vector<NodeRef> split_product(const NodeRef& e, int64_t whole, const std::vector<int64_t>& out) {
  std::vector<NodeRef> f, sym(out.size());
  factors(e, f);
  const std::optional<std::pair<const Node*, int64_t>> solved = solve_var(e, whole);
  auto known_value = [&](const NodeRef& x) {
    return solved && x.get() == solved->first ? std::optional<int64_t>(solved->second) : ir::known_value(x);
  };
  size_t k = 0;
  for (size_t j = 0; j < out.size(); j++) {
    if (out[j] == 1) {  // a factor of size 1 (a variable bound to 1) lands on a dim of 1
      if (k < f.size() && known_value(f[k]) == std::optional<int64_t>(1) && f[k]->op == Op::VAR)
        sym[j] = f[k++];
      continue;
    }
    int64_t p = 1;
    NodeRef x = const_int(1);
    while (p < out[j] && k < f.size()) {
      std::optional<int64_t> v = known_value(f[k]);
      if (!v || *v <= 0) return {};
      p *= *v;
      x = x * f[k++];
    }
    if (p != out[j]) return {};
    sym[j] = simplify(x);
  }
  for (; k < f.size(); k++)
    if (known_value(f[k]) != std::optional<int64_t>(1)) return {};
  return sym;
}

// FNV-1a of the name, 62 bits: the same id in every process
int64_t name_id(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h >> 2);
}

bool symbolic_dim(const NodeRef& n, size_t d) { return !n->sym.empty() && n->sym[d]; }

// The product of dims [lo, hi) of n as an expression.
NodeRef product(const NodeRef& n, size_t lo, size_t hi) {
  NodeRef p = const_int(1);
  for (size_t k = lo; k < hi; k++) p = p * dim_expr(n, k);
  return simplify(p);
}

// Reshape: dims grouped where the running products of the old and new shapes meet; a group of one
// new dim takes the product of its old dims' expressions, a symbolic old dim kept whole keeps its own.
std::vector<NodeRef> reshape_sym(const Shape& out, const NodeRef& x) {
  const Shape& in = x->shape;
  std::vector<NodeRef> sym(out.size());
  if (!checked_numel(in) || *checked_numel(in) == 0) return {};
  size_t i = 0, j = 0;
  for (;;) {
    while (i < in.size() && in[i] == 1 && !symbolic_dim(x, i)) i++;
    if (i < in.size() && in[i] == 1 && j < out.size() && out[j] == 1) {  // a symbolic dim of size 1
      sym[j++] = x->sym[i++];
      continue;
    }
    size_t units = j;  // new dims of 1 before the group: a split symbolic dim may have factors of 1
    while (j < out.size() && out[j] == 1) j++;
    if (i == in.size() || j == out.size()) break;
    size_t i0 = i, j0 = j;
    int64_t po = in[i++], pn = out[j++];
    while (po != pn) {
      if (po < pn && i < in.size())
        po *= in[i++];
      else if (j < out.size())
        pn *= out[j++];
      else
        return {};
    }
    while (i < in.size() && in[i] == 1 && symbolic_dim(x, i)) i++;  // joins the group it follows
    bool any = false;
    for (size_t k = i0; k < i; k++) any |= symbolic_dim(x, k);
    if (!any) continue;
    if (i - i0 == 1 && symbolic_dim(x, i0)) {  // one symbolic dim split: its factors over the new dims
      size_t end = j;                          // with the dims of 1 after it, where factors of 1 land
      while (end < out.size() && out[end] == 1) end++;
      std::vector<NodeRef> parts = split_product(
          x->sym[i0], in[i0],
          std::vector<int64_t>(out.begin() + static_cast<long>(units), out.begin() + static_cast<long>(end)));
      for (size_t k = 0; k < parts.size(); k++) sym[units + k] = parts[k];
      if (!parts.empty()) {
        j = end;
        continue;
      }
    }
    if (j - j0 == 1) sym[j0] = product(x, i0, i);
  }
  return sym;
}

}  // namespace

std::optional<std::pair<const Node*, int64_t>> solve_var(const NodeRef& e, int64_t size) {
  std::vector<NodeRef> f;
  factors(e, f);
  const Node* var = nullptr;
  int64_t constants = 1;
  for (const NodeRef& x : f) {
    if (x->op == Op::CONST) {
      constants *= x->ival();
    } else if (x->op == Op::VAR && !var) {
      var = x.get();
    } else {
      return std::nullopt;  // a second variable, or another expression
    }
  }
  if (!var || constants <= 0 || size % constants != 0) return std::nullopt;
  return std::make_pair(var, size / constants);
}

bool same_product(const std::vector<NodeRef>& a, const std::vector<NodeRef>& b) {
  auto monomial = [](const std::vector<NodeRef>& dims) {
    std::vector<NodeRef> f;
    for (const NodeRef& d : dims) factors(d, f);
    int64_t coef = 1;
    std::vector<const Node*> rest;
    for (const NodeRef& x : f) {
      if (x->op == Op::CONST)
        coef *= x->ival();
      else
        rest.push_back(x.get());
    }
    std::sort(rest.begin(), rest.end());
    return std::make_pair(coef, rest);
  };
  return monomial(a) == monomial(b);
}

NodeRef var(const std::string& name, int64_t min, int64_t max) {
  if (name.empty() || min < 0 || min > max)
    throw Error("kiln.Var: a variable needs a name and bounds 0 <= min <= max, got \"" + name + "\" [" +
                std::to_string(min) + ", " + std::to_string(max) + "]");
  // kernel names carry it (r_B_768): letters, digits and _
  if (!std::all_of(name.begin(), name.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
    throw Error("kiln.Var: a variable's name is letters, digits and _, got \"" + name + "\"");
  int64_t id = name_id(name);
  {
    std::lock_guard<std::mutex> l(names().mu);
    auto [it, fresh] = names().by_id.emplace(id, name);
    if (!fresh && it->second != name)
      throw Error("kiln.Var: the names \"" + name + "\" and \"" + it->second + "\" collide");
  }
  return make(Op::VAR, DType::I64, {}, {}, {id, min, max});
}

void note_value(const NodeRef& v, int64_t value) {
  std::lock_guard<std::mutex> l(last().mu);
  last().value[v->arg.at(0)] = value;
}

std::string var_name(const Node& v) {
  std::lock_guard<std::mutex> l(names().mu);
  auto it = names().by_id.find(v.arg.at(0));
  return it == names().by_id.end() ? "v" + std::to_string(v.arg[0]) : it->second;
}

bool vars_in_use() { return ever_made(Op::VAR); }

NodeRef dim_expr(const NodeRef& n, size_t d) {
  return symbolic_dim(n, d) ? n->sym[d] : const_int(n->shape[d]);
}

std::vector<NodeRef> dim_exprs(const NodeRef& n) {
  std::vector<NodeRef> out;
  for (size_t d = 0; d < n->shape.size(); d++) out.push_back(dim_expr(n, d));
  return out;
}

std::vector<NodeRef> infer_sym(Op op, const Shape& shape, const std::vector<NodeRef>& src,
                               const std::vector<int64_t>& arg) {
  if (shape.empty() || src.empty() ||
      std::all_of(src.begin(), src.end(), [](const NodeRef& s) { return s->sym.empty(); }))
    return {};
  std::vector<NodeRef> sym(shape.size());
  const NodeRef& x = src[0];
  auto same_rank = [&] { return x->shape.size() == shape.size() && !x->sym.empty(); };
  switch (op) {
    case Op::RESHAPE: sym = reshape_sym(shape, x); break;
    case Op::PERMUTE:
      if (!same_rank()) return {};
      for (size_t d = 0; d < shape.size(); d++) sym[d] = x->sym[static_cast<size_t>(arg[d])];
      break;
    case Op::REDUCE:
    case Op::EXPAND:
    case Op::FLIP:
    case Op::PAD:
    case Op::SHRINK:
      if (!same_rank()) return {};
      for (size_t d = 0; d < shape.size(); d++) {
        bool kept = x->shape[d] == shape[d];
        if (op == Op::REDUCE)
          kept = std::find(arg.begin() + 1, arg.end(), static_cast<int64_t>(d)) == arg.end();
        if (op == Op::PAD) kept = arg[2 * d] == 0 && arg[2 * d + 1] == 0;
        if (op == Op::SHRINK) kept = arg[2 * d] == 0 && arg[2 * d + 1] == shape[d] && kept;
        if (kept) sym[d] = x->sym[d];
      }
      break;
    default:
      if (!is_elementwise(op) && op != Op::CONTIGUOUS && op != Op::DETACH) return {};
      for (size_t d = 0; d < shape.size(); d++)
        for (auto& s : src)
          if (s->shape.size() == shape.size() && symbolic_dim(s, d) && s->shape[d] == shape[d]) {
            sym[d] = s->sym[d];
            break;
          }
  }
  if (std::none_of(sym.begin(), sym.end(), [](const NodeRef& s) { return s != nullptr; })) return {};
  return sym;
}

bool introduces_sym(const NodeRef& view) {
  return !view->sym.empty() && view->sym != infer_sym(view->op, view->shape, view->src, view->arg);
}

NodeRef remake_view(const NodeRef& view, NodeRef src, DType dtype) {
  if (introduces_sym(view))
    return make_sym(view->op, dtype, view->shape, {std::move(src)}, view->arg, view->sym);
  return make(view->op, dtype, view->shape, {std::move(src)}, view->arg, view->fval);
}

int64_t eval_index(const NodeRef& e, const Bindings& b) {
  switch (e->op) {
    case Op::CONST: return e->ival();
    case Op::VAR: {
      auto it = b.find(e.get());
      if (it == b.end())
        throw Error("kiln.symbolic: variable " + var_name(*e) +
                    " has no value: no dim of the graph stands for it alone");
      return it->second;
    }
    default: break;
  }
  if (e->src.size() != 2) throw Error("kiln.symbolic: cannot evaluate " + e->str());
  int64_t a = eval_index(e->src[0], b), c = eval_index(e->src[1], b);
  switch (e->op) {
    case Op::ADD: return a + c;
    case Op::MUL: return a * c;
    case Op::MAX: return std::max(a, c);
    case Op::IDIV: return c == 0 ? 0 : a / c;
    case Op::MOD: return c == 0 ? 0 : a % c;
    default: throw Error("kiln.symbolic: cannot evaluate " + e->str());
  }
}

Bindings bind_vars(const std::vector<NodeRef>& nodes) {
  Bindings b;
  for (auto& n : nodes)
    for (size_t d = 0; d < n->sym.size(); d++) {
      const NodeRef& v = n->sym[d];
      if (!v || v->op != Op::VAR) continue;
      int64_t size = n->shape[d];
      if (size < v->arg[1] || size > v->arg[2])
        throw Error("kiln.symbolic: " + var_name(*v) + " = " + std::to_string(size) + " (dim " +
                    std::to_string(d) + " of a " + shape_str(n->shape) + " " + dtype_name(n->dtype) +
                    " tensor) is outside its bounds [" + std::to_string(v->arg[1]) + ", " +
                    std::to_string(v->arg[2]) + "]");
      auto [it, fresh] = b.emplace(v.get(), size);
      if (!fresh && it->second != size)
        throw Error("kiln.symbolic: " + var_name(*v) + " stands for sizes " + std::to_string(it->second) +
                    " and " + std::to_string(size) + " in one graph");
    }
  for (auto& n : nodes)
    for (size_t d = 0; d < n->sym.size(); d++)
      if (n->sym[d] && eval_index(n->sym[d], b) != n->shape[d])
        throw Error("kiln.symbolic: dim " + std::to_string(d) + " of " + n->str() + " is " +
                    dim_label(n->sym[d]) + " = " + std::to_string(eval_index(n->sym[d], b)) +
                    ", not its size " + std::to_string(n->shape[d]));
  return b;
}

namespace {
int64_t largest(const NodeRef& e) {
  switch (e->op) {
    case Op::CONST: return e->ival();
    case Op::VAR: return e->arg[2];
    case Op::ADD: return largest(e->src[0]) + largest(e->src[1]);
    case Op::MUL: return largest(e->src[0]) * largest(e->src[1]);
    case Op::MAX: return std::max(largest(e->src[0]), largest(e->src[1]));
    default: throw Error("kiln.symbolic: cannot bound the size " + e->str());
  }
}
}  // namespace

int64_t capacity(const Node& n) {
  if (n.sym.empty()) return n.numel();
  int64_t total = 1;
  for (size_t d = 0; d < n.shape.size(); d++) {
    int64_t size = d < n.sym.size() && n.sym[d] ? largest(n.sym[d]) : n.shape[d];
    if (__builtin_mul_overflow(total, size, &total))
      throw Error("kiln.symbolic: the largest size of a " + shape_str(n.shape) + " tensor overflows int64");
  }
  return total;
}

std::vector<NodeRef> vars_of(const NodeRef& ast) {
  std::vector<NodeRef> out;
  for (auto& n : toposort({ast}))
    if (n->op == Op::VAR) out.push_back(n);
  std::sort(out.begin(), out.end(), [](const NodeRef& a, const NodeRef& b) { return a->arg < b->arg; });
  return out;
}

std::string dim_label(const NodeRef& e) {
  switch (e->op) {
    case Op::CONST: return std::to_string(e->ival());
    case Op::VAR: return var_name(*e);
    case Op::MUL: return dim_label(e->src[0]) + "x" + dim_label(e->src[1]);
    case Op::ADD: return dim_label(e->src[0]) + "p" + dim_label(e->src[1]);
    default: return "s";
  }
}

}  // namespace kiln::ir
