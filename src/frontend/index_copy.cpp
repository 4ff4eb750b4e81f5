// Tensor::index_copy and index_copy_: slices of a tensor replaced at positions read from an index
// tensor. One INDEX_COPY node, whose kernel stores only the new slices, into the old value's buffer
// where nothing else reads it (engine/in_place.h); elsewhere the rewrites put its composite in place.
#include "frontend/index_copy.h"

#include "engine/in_place.h"
#include "frontend/graph.h"
#include "ir/graph_rewrite.h"
#include "kiln/autocast.h"
#include "kiln/debug.h"

namespace kiln {

using frontend::fail;

Tensor Tensor::index_copy(int64_t dim, const Tensor& index, const Tensor& source) const {
  const char* op = "index_copy";
  if (!is_int(index.dtype()) || index.dim() > 1)
    fail(op, "index must be a 0-D or 1-D integer tensor, got " + to_string(index.dtype()) + " of shape " +
                 shape_str(index.shape()));
  if (this->dim() == 0) fail(op, "self must have at least one dim, got a 0-D tensor");
  int64_t d = frontend::norm_dim(op, dim, this->dim()), m = index.numel();
  Shape want = shape();
  want[static_cast<size_t>(d)] = m;
  if (source.shape() != want || source.dtype() != dtype())
    fail(op, "source must be " + to_string(dtype()) + " of shape " + shape_str(want) + " (self " +
                 shape_str(shape()) + " with " + std::to_string(m) + " index entries along dim " +
                 std::to_string(d) + "), got " + to_string(source.dtype()) + " of shape " +
                 shape_str(source.shape()));
  std::optional<Device> at;
  for (const Tensor* t : {this, &index, &source})
    if (auto dev = frontend::own_device(*t)) {
      if (at && *at != *dev)
        fail(op, "self, index and source must be on one device, got " + at->str() + " and " + dev->str());
      at = dev;
    }
  if (m == 0) return *this;
  // Out-of-range indices write nothing (the kernel's stores are gated, so memory outside self is
  // never written); KILN_VALIDATE=1 reports them instead, which reads the index on the host.
  if (settings().validate) {
    auto v = index.to_vector<int64_t>();
    for (size_t k = 0; k < v.size(); k++)
      if (v[k] < 0 || v[k] >= size(d))
        fail(op, "index " + std::to_string(v[k]) + " (element " + std::to_string(k) +
                     ") is out of range for dim " + std::to_string(d) + " of size " +
                     std::to_string(size(d)) + " (reported by KILN_VALIDATE=1; otherwise it writes nothing)");
  }
  return Tensor(ir::make(ir::Op::INDEX_COPY, dtype(), shape(),
                         {node(), index.reshape({m}).node(), source.node()}, {d}));
}

Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& source) {
  return assign_(index_copy(dim, index, source));
}

namespace frontend {

Tensor index_copy_composite(const Tensor& dst, int64_t d, const Tensor& index, const Tensor& source) {
  const int64_t n = dst.size(d), m = index.numel();
  Shape at(static_cast<size_t>(dst.dim()), 1);
  if (m == 1) {  // one slice: a where over a one-hot of its position, no sum
    at[static_cast<size_t>(d)] = n;
    return where((arange(n) == index).reshape(at), source, dst);
  }
  at[static_cast<size_t>(d)] = m;
  return dst.scatter(d, index.reshape(at).expand(source.shape()), source);
}

std::vector<std::optional<Tensor>> index_copy_backward(const ir::NodeRef& n, const Tensor& g) {
  const int64_t d = n->arg[0];
  Tensor index(n->src[1]), source(n->src[2]);
  // dst: the gradient where no slice was written; source: the gradient at the slices it wrote
  return {g.index_copy(d, index, zeros_like(source)), std::nullopt, g.index_select(d, index)};
}

namespace {

NodeRef lower_index_copy(const NodeRef& n) {
  if (engine::writes_in_place(*n)) return nullptr;
  Autocast plain(std::nullopt);  // the composite computes in the node's dtype, whatever scope realizes it
  return index_copy_composite(Tensor(n->src[0]), n->arg[0], Tensor(n->src[1]), Tensor(n->src[2])).node();
}

// the graph rewrites lower INDEX_COPY nodes with it; registered as the program starts, by the file
// that makes INDEX_COPY nodes
[[maybe_unused]] const bool lowering_registered =
    (ir::set_lowering(ir::Op::INDEX_COPY, &lower_index_copy), true);

}  // namespace
}  // namespace frontend

}  // namespace kiln
