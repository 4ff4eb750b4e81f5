// The rewrite stage (see stages.h).
#include "engine/stages.h"
#include "engine/survivors.h"
#include "ir/graph_rewrite.h"

namespace kiln::engine {

Rewritten rewrite(const std::vector<ir::NodeRef>& roots) {
  std::vector<ir::NodeRef> held = held_outside(roots);  // first: before the rewrites take references
  std::vector<ir::NodeRef> images = roots;
  images.insert(images.end(), held.begin(), held.end());
  images = ir::rewrite_graph(images);
  auto mid = images.begin() + static_cast<std::ptrdiff_t>(roots.size());
  return {{images.begin(), mid}, {mid, images.end()}};
}

}  // namespace kiln::engine
