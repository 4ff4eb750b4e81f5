// Symbolic simplifier for kernel index expressions: interval bounds (vmin/vmax) and the rule set
// that rewrites I64/bool scalar expressions to a canonical, simpler form.
#pragma once
#include <cstdint>

#include "ir/node.h"
#include "ir/rewrite.h"

namespace kiln::ir {

// Interval bounds of an integer/bool scalar expression: vmin(e) <= value <= vmax(e) at every point
// of the loop ranges (bool: 0/1). Nodes the analysis does not understand (LOAD, non-index dtypes ...)
// get the full range of their dtype. Bounds saturate at INT64_MIN/INT64_MAX; results are cached on
// the node (Node::has_bounds, vmin_, vmax_).
int64_t vmin(const NodeRef& e);
int64_t vmax(const NodeRef& e);

// The symbolic rules (indexed by op, built once). They only touch scalar I64/bool nodes whose sources
// are I64/bool scalars; everything else is left alone (but its sources are still visited by rewrite()).
const RuleSet& symbolic_rules();

// Rewrites e with symbolic_rules() to a fixed point. Recurses into all sources of every node, e.g.
// the index of a LOAD. simplify(simplify(e)) is simplify(e).
NodeRef simplify(const NodeRef& e);

}  // namespace kiln::ir
