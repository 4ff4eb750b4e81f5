// index_copy (Tensor::index_copy, index_copy_) beyond its frontend function: the composite that
// computes it where its kernel does not write in place, its gradient, and the rewrite rule that puts
// the composite in place of those INDEX_COPY nodes.
#pragma once
#include <optional>
#include <vector>

#include "ir/node.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

// dst with its slices index[t] along d replaced by source's slices t, from primitive ops (a where
// over a one-hot of the index, or scatter's one-hot sum): a new value in a buffer of its own.
Tensor index_copy_composite(const Tensor& dst, int64_t d, const Tensor& index, const Tensor& source);
// Gradients of dst and source of the INDEX_COPY node n, given the gradient g of its value.
std::vector<std::optional<Tensor>> index_copy_backward(const ir::NodeRef& n, const Tensor& g);

}  // namespace kiln::frontend
