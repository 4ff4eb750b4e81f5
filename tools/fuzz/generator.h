// kiln_fuzz's graph generator: random op graphs from a seed, built op by op with each node's float64
// reference value at hand, so that every op is well-conditioned and carries a bound on kiln's error.
#pragma once
#include <cstdint>

#include "graph.h"

namespace kiln::fuzz {

// The graph of one seed. A fraction grad_fraction of the seeds are gradient graphs (f32/f64,
// differentiable ops only, no input near a kink). A kiln::Error raised while building the graph ends
// it early: the message is returned in build_error and the failing op is the graph's last node.
struct Generated {
  Graph graph;
  std::string build_error;
};
Generated generate(uint64_t seed, double grad_fraction);

// Unit roundoff of a dtype (0 for integers and bool).
double unit_roundoff(DType t);
// The smallest normal value of a float dtype (0 for others).
double smallest_normal(DType t);

}  // namespace kiln::fuzz
