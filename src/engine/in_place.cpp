// Which INDEX_COPY nodes write in place (see in_place.h).
#include "engine/in_place.h"

#include <unordered_map>

#include "engine/launch_observer.h"
#include "ir/made_ops.h"

namespace kiln::engine {

using ir::Node;
using ir::NodeRef;

namespace {
thread_local const std::unordered_set<const Node*>* t_writable = nullptr;
}  // namespace

std::unordered_set<const Node*> writable_destinations(const std::vector<NodeRef>& roots) {
  std::unordered_set<const Node*> out;
  if (!ir::ever_made(ir::Op::INDEX_COPY)) return out;  // no walk of the graph on every realize
  std::vector<NodeRef> order = ir::toposort(roots, false);
  std::unordered_map<const Node*, long> edges;  // references from nodes of this graph
  bool any = false;
  for (auto& n : order) {
    any |= n->op == ir::Op::INDEX_COPY;
    for (auto& s : n->src) edges[s.get()] += 1;
  }
  if (!any) return out;
  LaunchObserver* obs = launch_observer();
  for (auto& n : order) {
    if (n->op != ir::Op::INDEX_COPY) continue;
    const NodeRef& dst = n->src[0];
    const std::shared_ptr<Buffer>& b = dst->buffer;
    // a view of an arena, or a buffer another node or tensor also holds, may be read again
    if (!b || b->base || edges[dst.get()] != 1) continue;
    if (dst.use_count() != 2) continue;  // `order` and this node: no handle, no lazy graph elsewhere
    if (b.use_count() != 1 + (obs ? obs->holds(*b) : 0)) continue;
    out.insert(dst.get());
  }
  return out;
}

WritableScope::WritableScope(const std::unordered_set<const Node*>& writable) : prev_(t_writable) {
  t_writable = &writable;
}
WritableScope::~WritableScope() { t_writable = prev_; }

bool writes_in_place(const Node& n) {
  return n.op == ir::Op::INDEX_COPY && t_writable && t_writable->count(n.src[0].get()) > 0;
}

}  // namespace kiln::engine
