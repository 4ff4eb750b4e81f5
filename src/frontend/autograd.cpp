// Autograd: gradients are more lazy graph. Each primitive op has a rule that maps the gradient of
// its output to gradients of its sources; backward() walks the graph in reverse topological order
// from the output to the leaves that require gradients. Composite ops need no rules of their own,
// and gradient graphs can be differentiated again (higher-order gradients).
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>
#include <unordered_map>
#include <unordered_set>

#include "frontend/attention.h"
#include "frontend/external.h"
#include "frontend/graph.h"
#include "frontend/index_copy.h"
#include "frontend/jit_recorder.h"
#include "frontend/layer_norm.h"
#include "frontend/tensor_impl.h"
#include "kiln/autocast.h"
#include "runtime/buffer.h"

namespace kiln {

using frontend::fail;
using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

thread_local bool g_grad_enabled = true;

struct Registry {
  std::mutex mu;
  std::unordered_map<const Node*, std::weak_ptr<Tensor::Impl>> leaves;  // BUFFER node -> leaf tensor
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

Tensor T(const NodeRef& n) { return Tensor(n); }

// Gradient of each source of n, given the gradient g of n (nullopt: no gradient flows there).
// need[i]: whether source i wants its gradient (ops of several sources make only those).
std::vector<std::optional<Tensor>> rule(const NodeRef& n, const Tensor& g, const std::vector<bool>& need) {
  const auto& s = n->src;
  auto src = [&](size_t i) { return T(s[i]); };
  auto grad_if = [&](size_t i, auto make) { return need[i] ? std::optional<Tensor>(make()) : std::nullopt; };
  const Shape& in = s.empty() ? n->shape : s[0]->shape;
  switch (n->op) {
    case Op::ADD: return {g, g};
    case Op::MUL: return {grad_if(0, [&] { return g * src(1); }), grad_if(1, [&] { return g * src(0); })};
    case Op::MULACC:
      return {grad_if(0, [&] { return g * src(1); }), grad_if(1, [&] { return g * src(2); }), g};
    case Op::MAX: {  // ties split the gradient evenly, as PyTorch's maximum does
      Tensor a = src(0), b = src(1);
      Tensor share = where(a > b, ones_like(g), where(a == b, full_like(g, 0.5), zeros_like(g)));
      return {grad_if(0, [&] { return g * share; }), grad_if(1, [&] { return g * (1.0 - share); })};
    }
    case Op::EXP2: return {g * T(n) * std::numbers::ln2};
    case Op::LOG2: return {g / (src(0) * std::numbers::ln2)};
    case Op::SIN: return {g * src(0).cos()};
    case Op::SQRT: return {g / (T(n) * 2.0)};
    case Op::RECIP: return {-(g * T(n) * T(n))};
    case Op::TRUNC: return {zeros_like(src(0))};
    case Op::CAST:
      if (!is_float(s[0]->dtype)) return {std::nullopt};
      return {g.to(s[0]->dtype)};
    case Op::WHERE:
      return {std::nullopt, grad_if(1, [&] { return where(src(0), g, zeros_like(g)); }),
              grad_if(2, [&] { return where(src(0), zeros_like(g), g); })};
    case Op::REDUCE: {
      Op rop = static_cast<Op>(n->arg[0]);
      Tensor ge = g.expand(in), x = src(0);
      std::vector<int64_t> axes(n->arg.begin() + 1, n->arg.end());
      if (rop == Op::ADD) return {ge};
      if (rop == Op::MAX) {  // shared evenly between the maxima
        Tensor mask = (x == T(n).expand(in)).to(g.dtype());
        return {ge * mask / mask.sum(axes, true).expand(in)};
      }
      // MUL: d/dx_i prod = product of the others, also when some x are zero
      Tensor is0 = x == 0.0, zeros = is0.to(g.dtype()).sum(axes, true).expand(in);
      Tensor prod_nonzero = where(is0, ones_like(x), x).prod(axes, true).expand(in);
      Tensor others =
          where(zeros == 0.0, T(n).expand(in) / x, where((zeros == 1.0) & is0, prod_nonzero, zeros_like(x)));
      return {ge * others};
    }
    case Op::RESHAPE: return {g.reshape(in)};
    case Op::PERMUTE: {
      std::vector<int64_t> inv(n->arg.size());
      for (size_t i = 0; i < inv.size(); i++) inv[static_cast<size_t>(n->arg[i])] = static_cast<int64_t>(i);
      return {g.permute(inv)};
    }
    case Op::EXPAND: {
      std::vector<int64_t> axes;
      for (size_t i = 0; i < in.size(); i++)
        if (in[i] == 1 && n->shape[i] != 1) axes.push_back(static_cast<int64_t>(i));
      return {g.sum(axes, true)};
    }
    case Op::PAD: {
      std::vector<int64_t> arg;
      for (size_t i = 0; i < in.size(); i++) arg.insert(arg.end(), {n->arg[2 * i], n->arg[2 * i] + in[i]});
      return {T(ir::make(Op::SHRINK, g.dtype(), in, {g.node()}, arg))};
    }
    case Op::SHRINK: {
      std::vector<int64_t> arg;
      for (size_t i = 0; i < in.size(); i++)
        arg.insert(arg.end(), {n->arg[2 * i], in[i] - n->arg[2 * i + 1]});
      return {T(ir::make(Op::PAD, g.dtype(), in, {g.node()}, arg))};
    }
    case Op::FLIP: return {T(ir::make(Op::FLIP, g.dtype(), in, {g.node()}, n->arg))};
    case Op::CONTIGUOUS: return {g};
    case Op::EXTERNAL: return frontend::external_backward(n, g);
    case Op::ATTENTION: return frontend::attention_backward(n, g);
    case Op::LAYER_NORM: return frontend::layer_norm_backward(n, g);
    case Op::INDEX_COPY: return frontend::index_copy_backward(n, g);
    default: break;
  }
  // comparisons, integer and bitwise ops, DETACH: no gradient
  return std::vector<std::optional<Tensor>>(s.size());
}

bool differentiable_edge(const NodeRef& n) { return n->op != Op::DETACH && is_float(n->dtype); }

// Gradients of sum(roots[i] * seeds[i]) with respect to each target node.
std::vector<std::optional<Tensor>> backprop(const std::vector<NodeRef>& roots,
                                            const std::vector<Tensor>& seeds,
                                            const std::vector<NodeRef>& targets) {
  // the forward's ops differentiated in the dtypes it chose: autocast does not recast the gradients
  Autocast plain(std::nullopt);
  std::unordered_set<const Node*> target_set;
  for (auto& t : targets) target_set.insert(t.get());
  auto order = ir::toposort(roots);
  std::unordered_set<const Node*> reaches;  // nodes with a differentiable path to a target
  for (auto& n : order) {
    bool r = target_set.count(n.get()) > 0;
    if (differentiable_edge(n))
      for (auto& s : n->src) r |= reaches.count(s.get()) > 0;
    if (r) reaches.insert(n.get());
  }
  std::unordered_map<const Node*, Tensor> grads;
  for (size_t i = 0; i < roots.size(); i++) {
    auto it = grads.find(roots[i].get());
    grads[roots[i].get()] = it == grads.end() ? seeds[i] : it->second + seeds[i];
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeRef& n = *it;
    auto g = grads.find(n.get());
    if (g == grads.end() || !reaches.count(n.get()) || !differentiable_edge(n)) continue;
    std::vector<bool> need;
    for (auto& s : n->src) need.push_back(reaches.count(s.get()) > 0);
    auto src_grads = rule(n, g->second, need);
    for (size_t i = 0; i < n->src.size(); i++) {
      const NodeRef& s = n->src[i];
      if (!src_grads[i] || !reaches.count(s.get())) continue;
      Tensor sg = src_grads[i]->to(s->dtype);
      auto e = grads.find(s.get());
      if (e == grads.end())
        grads.emplace(s.get(), sg);
      else
        e->second = e->second + sg;
    }
  }
  std::vector<std::optional<Tensor>> out;
  for (auto& t : targets) {
    auto g = grads.find(t.get());
    out.push_back(g == grads.end() ? std::nullopt : std::optional<Tensor>(g->second));
  }
  return out;
}

std::vector<NodeRef> leaves_in(const NodeRef& root) {
  std::vector<NodeRef> out;
  std::lock_guard<std::mutex> l(registry().mu);
  if (registry().leaves.empty()) return out;
  for (auto& n : ir::toposort({root}))
    if (n->op == Op::BUFFER && registry().leaves.count(n.get()) && !registry().leaves[n.get()].expired())
      out.push_back(n);
  return out;
}

}  // namespace

namespace autograd {

void register_leaf(const std::shared_ptr<Tensor::Impl>& impl) {
  std::lock_guard<std::mutex> l(registry().mu);
  auto it = registry().leaves.find(impl->node.get());
  auto other = it == registry().leaves.end() ? nullptr : it->second.lock();
  if (other && other != impl) {
    // equal values are one node (hash-consing), but two leaves need their own buffers to get
    // their own gradients: give this one a copy
    const Buffer& src = *impl->node->buffer;
    auto b = src.to(src.device);
    NodeRef n = ir::make(Op::BUFFER, b->dtype, impl->node->shape, {}, {b->id, b->device.code()});
    n->buffer = b;
    impl->node = n;
  }
  registry().leaves[impl->node.get()] = impl;
}

std::shared_ptr<Tensor::Impl> leaf_of(const Node* n) {
  std::lock_guard<std::mutex> l(registry().mu);
  auto it = registry().leaves.find(n);
  return it == registry().leaves.end() ? nullptr : it->second.lock();
}

void rebind(const std::shared_ptr<Tensor::Impl>& impl, NodeRef node) {
  if (impl->leaf) {
    std::lock_guard<std::mutex> l(registry().mu);
    registry().leaves.erase(impl->node.get());
  }
  impl->node = std::move(node);
  if (impl->leaf && impl->node->op == Op::BUFFER) register_leaf(impl);
}

bool graph_requires_grad(const NodeRef& root) {
  {
    std::lock_guard<std::mutex> l(registry().mu);
    if (registry().leaves.empty()) return false;
  }
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> stack{root};
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second || !differentiable_edge(n)) continue;
    if (n->op == Op::BUFFER && leaf_of(n.get())) return true;
    for (auto& s : n->src) stack.push_back(s);
  }
  return false;
}

}  // namespace autograd

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

Tensor& Tensor::requires_grad_(bool on) {
  if (!on) {
    std::lock_guard<std::mutex> l(registry().mu);
    registry().leaves.erase(node().get());
    impl_->leaf = false;
    return *this;
  }
  if (!is_float(dtype()))
    fail("requires_grad_", "only floating point tensors can require gradients, got " + to_string(dtype()));
  if (node()->op != Op::BUFFER && autograd::graph_requires_grad(node()))
    fail("requires_grad_", "only leaf tensors can be marked; this one of shape " + shape_str(shape()) +
                               " is computed from tensors that require gradients (use detach() first)");
  realize();  // a leaf is a buffer
  if (node()->op != Op::BUFFER) impl_->node = ir::make(Op::CONTIGUOUS, dtype(), shape(), {node()}), realize();
  impl_->leaf = true;
  autograd::register_leaf(impl_);
  return *this;
}

bool Tensor::requires_grad() const { return autograd::graph_requires_grad(node()); }
bool Tensor::is_leaf() const { return node()->op == Op::BUFFER || !requires_grad(); }
Tensor Tensor::grad() const { return impl_ ? impl_->grad : Tensor(); }
void Tensor::set_grad(const Tensor& g) {
  if (g.defined() && g.shape() != shape())
    fail("set_grad",
         "gradient of shape " + shape_str(g.shape()) + " for a tensor of shape " + shape_str(shape()));
  impl_->grad = g;
}
void Tensor::zero_grad() { impl_->grad = Tensor(); }

Tensor& Tensor::assign_(const Tensor& value) {
  if (value.shape() != shape())
    fail("assign_",
         "value of shape " + shape_str(value.shape()) + " for a tensor of shape " + shape_str(shape()));
  if (jit::Recording* r = jit::active()) r->assigning(impl_);
  if (impl_->leaf) {
    std::lock_guard<std::mutex> l(registry().mu);
    registry().leaves.erase(node().get());
  }
  impl_->node = value.to(dtype()).detach().node();
  return *this;
}

Tensor Tensor::detach() const {
  if (node()->op == Op::DETACH) return Tensor(node());
  return Tensor(ir::make(Op::DETACH, dtype(), shape(), {node()}));
}

namespace {
std::vector<std::weak_ptr<Tensor::Impl>>& backward_roots() {
  thread_local std::vector<std::weak_ptr<Tensor::Impl>> roots;
  return roots;
}
}  // namespace

std::vector<Tensor> autograd::take_backward_roots() {
  std::vector<Tensor> out;
  // handles on the same nodes, not detached copies (what a Tensor made under a NoGradGuard is)
  const bool was = g_grad_enabled;
  g_grad_enabled = true;
  for (auto& w : backward_roots())
    if (auto impl = w.lock(); impl && impl->node->op != Op::BUFFER && !impl->node->buffer)
      out.push_back(Tensor(impl->node));  // the same node: computing it computes the caller's tensor
  g_grad_enabled = was;
  backward_roots().clear();
  return out;
}

void Tensor::backward(std::optional<Tensor> grad_output) const {
  auto leaves = leaves_in(node());
  if (leaves.empty() || !requires_grad())
    fail("backward", "the tensor of shape " + shape_str(shape()) + " (" + to_string(dtype()) +
                         ") does not require grad: no leaf marked with requires_grad_() reaches it through "
                         "differentiable ops");
  if (!grad_output) {
    if (numel() != 1)
      fail("backward", "grad_output can be implied only for tensors with one element, this one has shape " +
                           shape_str(shape()) + "; pass grad_output");
    grad_output = ones_like(*this);
  }
  if (grad_output->shape() != shape())
    fail("backward", "grad_output of shape " + shape_str(grad_output->shape()) + " for a tensor of shape " +
                         shape_str(shape()));
  auto grads = backprop({node()}, {grad_output->to(dtype())}, leaves);
  auto& roots = backward_roots();
  if (roots.size() >= 64) roots.erase(roots.begin());  // a loop that never steps keeps a few
  roots.push_back(impl_);
  for (size_t i = 0; i < leaves.size(); i++) {
    auto impl = autograd::leaf_of(leaves[i].get());
    if (!impl || !grads[i]) continue;
    Tensor g = *grads[i];
    impl->grad = impl->grad.defined() ? impl->grad + g : g;
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool allow_unused) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    fail("grad", std::to_string(grad_outputs.size()) + " grad_outputs for " + std::to_string(outputs.size()) +
                     " outputs");
  std::vector<NodeRef> roots, targets;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); i++) {
    const Tensor& o = outputs[i];
    if (grad_outputs.empty() && o.numel() != 1)
      fail("grad", "output " + std::to_string(i) + " has shape " + shape_str(o.shape()) +
                       ": grad_outputs are needed for outputs with more than one element");
    Tensor seed = grad_outputs.empty() ? ones_like(o) : grad_outputs[i];
    if (seed.shape() != o.shape())
      fail("grad", "grad_output " + std::to_string(i) + " has shape " + shape_str(seed.shape()) +
                       ", output has " + shape_str(o.shape()));
    roots.push_back(o.node());
    seeds.push_back(seed.to(o.dtype()));
  }
  for (auto& x : inputs) targets.push_back(x.node());
  auto g = backprop(roots, seeds, targets);
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!g[i] && !allow_unused)
      fail("grad", "input " + std::to_string(i) + " of shape " + shape_str(inputs[i].shape()) +
                       " is not used by the outputs (pass allow_unused = true for zeros)");
    out.push_back(g[i] ? *g[i] : zeros_like(inputs[i]));
  }
  return out;
}

}  // namespace kiln
