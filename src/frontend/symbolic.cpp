// kiln::Var and Tensor::symbolic: dims that stand for a variable (ir/symbolic.h).
#include "ir/symbolic.h"

#include "frontend/graph.h"
#include "frontend/tensor_impl.h"

namespace kiln {

Var::Var(std::string name, int64_t min, int64_t max) : name_(std::move(name)), min_(min), max_(max) {
  ir::var(name_, min_, max_);  // checks the name and bounds
}

Tensor Tensor::symbolic(int64_t d, const Var& v) const {
  int64_t k = frontend::norm_dim("symbolic", d, dim());
  int64_t size = shape()[static_cast<size_t>(k)];
  if (size < v.min() || size > v.max())
    frontend::fail("symbolic", "dim " + std::to_string(k) + " of a " + shape_str(shape()) +
                                   " tensor has size " + std::to_string(size) + ", outside " + v.name() +
                                   "'s bounds [" + std::to_string(v.min()) + ", " + std::to_string(v.max()) +
                                   "]");
  ir::NodeRef n = node();
  std::vector<ir::NodeRef> sym = n->sym;
  // a mark on a mark: one view over the first's source, so a buffer is read through all its dims
  if (n->op == ir::Op::RESHAPE && n->shape == n->src[0]->shape && ir::introduces_sym(n)) n = n->src[0];
  sym.resize(shape().size());
  sym[static_cast<size_t>(k)] = ir::var(v.name(), v.min(), v.max());
  ir::note_value(sym[static_cast<size_t>(k)], size);
  // a realized tensor stays realized (a kiln::Jit input, say): the mark over its buffer
  if (n->op == ir::Op::BUFFER && n->buffer)
    return Tensor(frontend::buffer_node(n->buffer, shape(), std::move(sym)));
  return Tensor(ir::make_sym(ir::Op::RESHAPE, dtype(), shape(), {n}, {}, std::move(sym)));
}

std::optional<Var> Tensor::var_of(int64_t d) const {
  int64_t k = frontend::norm_dim("var_of", d, dim());
  const ir::NodeRef& n = node();
  if (static_cast<size_t>(k) >= n->sym.size() || !n->sym[static_cast<size_t>(k)] ||
      n->sym[static_cast<size_t>(k)]->op != ir::Op::VAR)
    return std::nullopt;
  const ir::Node& v = *n->sym[static_cast<size_t>(k)];
  return Var(ir::var_name(v), v.arg[1], v.arg[2]);
}

}  // namespace kiln
