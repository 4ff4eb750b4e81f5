// Scatter-adds for one-hot sums over an output loop (an embedding's weight gradient, index_add).
#pragma once
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "ir/node.h"

namespace kiln::codegen {

struct Scatter {
  ir::NodeRef ast;         // the kernel, rewritten or not
  int64_t zero_elems = 0;  // rewritten: output 0's elements, set to zero before the kernel adds into it
  bool serial = false;     // rewritten: on the CPU the outer loop must not be split over threads
};

// A kernel storing sum over r of where(e(r) == v && c, x(r, v), 0) for an output loop v, with e free
// of v and moving with r, becomes one that adds x(r, e(r)) into out[e(r)] for each r where c holds
// and 0 <= e(r) < size of v (a STORE with arg {1}: atomic on the GPU). Else the kernel unchanged.
Scatter scatter_onehot_sums(const ir::NodeRef& ast, Target target, std::vector<std::string>& log);

}  // namespace kiln::codegen
