// The rewrite stage (see stages.h).
#include "engine/in_place.h"
#include "engine/stages.h"
#include "engine/survivors.h"
#include "ir/graph_rewrite.h"

namespace kiln::engine {

Rewritten rewrite(const std::vector<ir::NodeRef>& roots) {
  // first: before the rewrites take references
  std::unordered_set<const ir::Node*> writable = writable_destinations(roots);
  std::vector<ir::NodeRef> held = held_outside(roots);
  std::vector<ir::NodeRef> images = roots;
  images.insert(images.end(), held.begin(), held.end());
  {
    WritableScope scope(writable);  // the other INDEX_COPY nodes become their composites
    images = ir::rewrite_graph(images);
  }
  auto mid = images.begin() + static_cast<std::ptrdiff_t>(roots.size());
  return {{images.begin(), mid}, {mid, images.end()}};
}

}  // namespace kiln::engine
