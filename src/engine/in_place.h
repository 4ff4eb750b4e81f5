// In-place writes: which INDEX_COPY nodes of a realize write into their destination's buffer (the
// kernel stores only the new slices there) rather than being replaced by their composite (a new
// buffer holding every element). Decided in the rewrite stage, before the rewrites take references.
#pragma once
#include <unordered_set>
#include <vector>

#include "ir/node.h"

namespace kiln::engine {

// The realized destinations (INDEX_COPY's first source) under `roots` that their INDEX_COPY may
// overwrite: nothing reads them but that one node (no other node of this graph, no tensor handle or
// lazy graph outside it, no other node on the same buffer, nothing the launch observer keeps besides
// its own references), so their old values are never read again. Counts references: call it before
// anything else takes some.
std::unordered_set<const ir::Node*> writable_destinations(const std::vector<ir::NodeRef>& roots);

// Installs the destinations for the rewrites of one realize on this thread (the graph rewrites ask
// writes_in_place through the composite's lowering), for the lifetime of the scope.
class WritableScope {
 public:
  explicit WritableScope(const std::unordered_set<const ir::Node*>& writable);
  ~WritableScope();
  WritableScope(const WritableScope&) = delete;
  WritableScope& operator=(const WritableScope&) = delete;

 private:
  const std::unordered_set<const ir::Node*>* prev_;
};

// Whether INDEX_COPY node n writes into its destination's buffer in this realize; false outside one.
bool writes_in_place(const ir::Node& n);

}  // namespace kiln::engine
