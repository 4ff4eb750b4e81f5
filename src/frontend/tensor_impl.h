// The state behind a Tensor handle, shared by the frontend files (tensor.cpp, autograd.cpp).
#pragma once
#include "ir/node.h"
#include "kiln/tensor.h"

namespace kiln {

struct Tensor::Impl {
  ir::NodeRef node;   // lazy graph node; a BUFFER node once realized, unless autograd needs the graph
  Tensor grad;        // accumulated gradient of a leaf (lazy)
  bool leaf = false;  // marked with requires_grad_(): registered again after each assign_ + realize
};

namespace autograd {
// Whether gradients can flow from n down to a leaf that requires them (not through DETACH).
bool graph_requires_grad(const ir::NodeRef& n);
// Registers a leaf's current BUFFER node (after requires_grad_, or after an assigned value is realized).
void register_leaf(const std::shared_ptr<Tensor::Impl>& impl);
// The leaf tensor registered for a BUFFER node, or nullptr.
std::shared_ptr<Tensor::Impl> leaf_of(const ir::Node* n);
// Points a tensor at a new node, as assign_ + realize would (a leaf stays registered).
void rebind(const std::shared_ptr<Tensor::Impl>& impl, ir::NodeRef node);
// The tensors backward() ran from on this thread since the last call that are still alive and not
// computed (a training step's loss): an optimizer step computes them in the schedule of the
// gradients, where their forward is computed anyway, instead of a later read computing it again.
std::vector<Tensor> take_backward_roots();
}  // namespace autograd

namespace frontend {
// The BUFFER node of a realized value; with symbolic dims (ir/symbolic.h: one entry a dim, null
// where concrete), a mark of them over it, realized too, so the dims stay symbolic downstream.
ir::NodeRef buffer_node(const std::shared_ptr<Buffer>& b, const Shape& s);
ir::NodeRef buffer_node(const std::shared_ptr<Buffer>& b, const Shape& s, std::vector<ir::NodeRef> sym);
// Whether n is realized as a tensor's node: a BUFFER, or a mark of symbolic dims over one.
bool is_buffer_node(const ir::Node& n);
// A realized copy of t's values in a buffer of its own on t's device (copied there, not through the
// host), with no gradient: a BUFFER node no other tensor has, whatever values it holds.
Tensor own_copy(const Tensor& t);
}  // namespace frontend

}  // namespace kiln
