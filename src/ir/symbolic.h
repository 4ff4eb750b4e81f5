// Symbolic dimensions: a dim of a tensor can stand for a named variable with bounds (kiln::Var),
// whose value is the dim's size in each realize. Beside its concrete shape, a tensor-level node
// carries each symbolic dim's expression over VAR nodes (Node::sym); kernels built from such nodes
// loop to the expression, which the launch binds, so one compiled kernel serves every value.
// Everything else (checks, buffer sizes) keeps using the concrete sizes of the call.
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/node.h"

namespace kiln::ir {

// The VAR node of a variable (its identity is its name and bounds, so kernels hash alike in every
// process); min >= 0.
NodeRef var(const std::string& name, int64_t min, int64_t max);
std::string var_name(const Node& v);
// Notes the size a variable was just given (Tensor::symbolic): reshapes that split a product of
// variables use it to tell which factor goes where.
void note_value(const NodeRef& v, int64_t value);
// Whether any VAR was ever made (the symbolic stages are skipped in processes without one).
bool vars_in_use();

// The expression of dim d of n: its symbolic one, else the constant size.
NodeRef dim_expr(const NodeRef& n, size_t d);
std::vector<NodeRef> dim_exprs(const NodeRef& n);
// A tensor-level node's symbolic dims from its sources' (empty when none is symbolic). Movement
// that keeps a symbolic dim keeps it; a reshape merging dims multiplies their expressions; a dim
// made by expanding, padding or shrinking is concrete (its kernels are compiled per size).
std::vector<NodeRef> infer_sym(Op op, const Shape& shape, const std::vector<NodeRef>& src,
                               const std::vector<int64_t>& arg);

// Whether a view sets symbolic dims its source does not give it (a Tensor::symbolic mark), and the
// view made again over another source (and dtype) keeping them.
bool introduces_sym(const NodeRef& view);
NodeRef remake_view(const NodeRef& view, NodeRef src, DType dtype);

// The values of the VARs of a graph (nodes: a walk of it), each from a dim it stands for alone;
// checks each in its bounds, bound once, and every symbolic dim's expression equal to its size.
using Bindings = std::unordered_map<const Node*, int64_t>;
Bindings bind_vars(const std::vector<NodeRef>& nodes);
// The variable of e and its value when e is one variable times constants (B, 8 * B) and e equals
// `size`; nullopt for anything else.
std::optional<std::pair<const Node*, int64_t>> solve_var(const NodeRef& e, int64_t size);
// An I64 expression's value with VARs bound.
int64_t eval_index(const NodeRef& e, const Bindings& b);
// Elements of n with each symbolic dim at its largest value (its variables at their upper bounds):
// what a buffer must hold to serve every binding. n's numel when none is symbolic.
int64_t capacity(const Node& n);

// Whether two lists of dim expressions multiply to the same product (constants and factors compared
// as monomials: 4 * T * 8 and 32 * T agree).
bool same_product(const std::vector<NodeRef>& a, const std::vector<NodeRef>& b);

// The VARs an AST reads, in a canonical order (the slots of the launch's values: see linearize).
std::vector<NodeRef> vars_of(const NodeRef& ast);
// "T", "BxT", "1024": a loop's trip count in kernel names.
std::string dim_label(const NodeRef& e);

}  // namespace kiln::ir
