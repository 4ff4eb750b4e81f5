// kiln_fuzz's error analysis of tensor-level IR graphs: a bound on how far kiln's rounded evaluation
// of a graph may be from the exact (float64 reference) values, used for gradient graphs.
#pragma once
#include <vector>

#include "ir/node.h"

namespace kiln::fuzz {

// Per root, a bound on max |kiln - exact| over its elements, propagated op by op through first-order
// rounding and sensitivity rules from the reference values; infinity where a result could jump (a
// comparison or truncation closer to its threshold than the error can reach).
std::vector<double> error_bounds(const std::vector<ir::NodeRef>& roots);

}  // namespace kiln::fuzz
