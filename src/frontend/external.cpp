// External ops (see external.h): the EXTERNAL node and the registry of backward callbacks.
#include "frontend/external.h"

#include <mutex>
#include <unordered_map>

#include "frontend/graph.h"
#include "frontend/tensor_impl.h"
#include "runtime/buffer.h"

namespace kiln::frontend {

namespace {

struct Entry {
  std::weak_ptr<const ir::Node> node;
  ExternalBackward backward;
};

struct Registry {
  std::mutex mu;
  int64_t next_id = 0;
  std::unordered_map<int64_t, Entry> entries;  // EXTERNAL arg[0] -> its callback
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

Tensor external(const std::vector<Tensor>& inputs, const Tensor& value, ExternalBackward backward) {
  bool needs_grad = false;
  for (auto& t : inputs) needs_grad |= grad_enabled() && t.requires_grad();
  if (!needs_grad) return value;
  value.realize();
  std::vector<NodeRef> src;
  for (auto& t : inputs) src.push_back(t.node());
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  // callbacks live as long as their node: drop those of nodes gone
  for (auto it = r.entries.begin(); it != r.entries.end();)
    it = it->second.node.expired() ? r.entries.erase(it) : std::next(it);
  int64_t id = r.next_id++;
  NodeRef n = ir::make(Op::EXTERNAL, value.dtype(), value.shape(), src, {id});
  ir::set_buffer(*n, value.node()->buffer);
  r.entries[id] = Entry{n, std::move(backward)};
  return Tensor(n);
}

std::vector<std::optional<Tensor>> external_backward(const NodeRef& n, const Tensor& grad) {
  ExternalBackward backward;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.entries.find(n->arg.at(0));
    if (it == r.entries.end()) fail("backward", "no backward registered for external op " + n->str());
    backward = it->second.backward;
  }
  std::vector<std::optional<Tensor>> g = backward(grad);
  if (g.size() != n->src.size())
    fail("backward", "external op " + n->str() + " returned " + std::to_string(g.size()) + " gradients for " +
                         std::to_string(n->src.size()) + " inputs");
  return g;
}

}  // namespace kiln::frontend
