// Kernel outputs that outlive their schedule (see survivors.h).
#include "engine/survivors.h"

#include <unordered_map>

namespace kiln::engine {

using ir::Node;
using ir::NodeRef;

std::vector<NodeRef> held_outside(const std::vector<NodeRef>& roots) {
  std::vector<NodeRef> order = ir::toposort(roots, false);
  std::unordered_map<const Node*, long> owners;  // references this graph and the caller account for
  for (auto& n : order) {
    owners[n.get()] += 1;  // `order`
    for (auto& s : n->src) owners[s.get()] += 1;
  }
  for (auto& r : roots) owners[r.get()] += 1;
  std::unordered_set<const Node*> is_root;
  for (auto& r : roots) is_root.insert(r.get());
  std::vector<NodeRef> held;
  for (auto& n : order) {
    if (is_root.count(n.get()) || n->op == ir::Op::BUFFER || n->buffer) continue;
    if (n.use_count() > owners[n.get()]) held.push_back(n);
  }
  return held;
}

std::unordered_set<const Node*> surviving_outputs(const schedule::Schedule& s,
                                                  const std::vector<NodeRef>& rewritten_roots,
                                                  const std::vector<NodeRef>& held_images) {
  std::unordered_set<const Node*> outputs, survivors;
  for (auto& k : s.kernels)
    for (auto& o : k.outputs) outputs.insert(o.get());
  for (auto& r : rewritten_roots) survivors.insert(r.get());
  std::vector<NodeRef> stack = held_images;
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    if (outputs.count(n.get())) {
      survivors.insert(n.get());
      continue;
    }
    if (n->op == ir::Op::BUFFER || n->buffer) continue;
    for (auto& src : n->src) stack.push_back(src);
  }
  return survivors;
}

}  // namespace kiln::engine
