// Graph rewrites on the tensor graph before scheduling: constant folding, algebraic identities,
// movement-op composition and removal of no-op views. Each pass is a RuleSet; KILN_DEBUG=6 dumps
// the graph after each pass.
#pragma once
#include <vector>

#include "ir/node.h"
#include "ir/rewrite.h"

namespace kiln::ir {

const RuleSet& fold_constants_rules();
const RuleSet& algebraic_rules();  // x*1, x+0, x*0 (exact cases), cast to own dtype
// reshape∘reshape, permute∘permute, identities, views of constants; ATTENTION and LAYER_NORM -> their
// composites where no kernel computes them, INDEX_COPY where it does not write in place
const RuleSet& movement_rules();

// The rule that puts its composite of primitive ops in place of an `op` node (ATTENTION, LAYER_NORM)
// no kernel computes (nullptr: a kernel does). The frontend, which defines the composites, registers
// them; ir includes nothing above it. Until then such nodes stay as they are.
using Lowering = NodeRef (*)(const NodeRef&);
void set_lowering(Op op, Lowering lower);

std::vector<NodeRef> rewrite_graph(const std::vector<NodeRef>& roots);

}  // namespace kiln::ir
