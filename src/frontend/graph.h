// Frontend helpers that build tensor-level graph nodes with checked shapes and dtypes.
#pragma once
#include <string>
#include <vector>

#include "ir/node.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::frontend {

using ir::NodeRef;
using ir::Op;

// A tensor made with a lazy graph deeper than this (ir::Node::depth) is realized at once: long
// chains (a loss summed over many steps) compute in realizes of this depth, not one huge one. A
// training step of a 12-layer GPT is about 2,700 deep (220 a layer), so models of up to ~140 layers
// train in one graph.
constexpr uint32_t kMaxLazyDepth = 32768;

// Errors: "kiln.<op>: <message>" naming shapes and dtypes.
[[noreturn]] void fail(const std::string& op, const std::string& msg);
int64_t norm_dim(const std::string& op, int64_t d, int64_t ndim);  // negative dims, range check
// A new shape's element count; fails naming op if a dim is negative or the count overflows int64.
int64_t check_shape(const std::string& op, const Shape& s);

NodeRef cast(const NodeRef& x, DType t);
NodeRef reshape(const NodeRef& x, const Shape& s);
NodeRef expand(const NodeRef& x, const Shape& s);  // prepends 1s as needed
NodeRef full(const Shape& s, double v, DType t);
NodeRef full(const Shape& s, const Scalar& v, DType t);  // exact for int64 values of int scalars
// Elementwise node: all sources must already share the shape; out dtype given.
NodeRef ewise(Op op, std::vector<NodeRef> src, DType out);
// Binary op on two nodes of one dtype, broadcasting shapes.
NodeRef binary(const std::string& name, Op op, NodeRef a, NodeRef b);
// A tensor asked for on a device other than the default is made there at once.
Tensor place(const Tensor& t, std::optional<Device> d);
// The device a tensor belongs to, if any: constants of no device follow the tensors they meet.
std::optional<Device> own_device(const Tensor& t);
NodeRef reduce(Op rop, const NodeRef& x, std::vector<int64_t> axes);  // keepdim shape

}  // namespace kiln::frontend
