// Reference interpreter: evaluates tensor-level graphs element by element (floats in f64, integers
// exactly, wrapped to their dtype). The oracle for tests and KILN_VALIDATE; no code generation.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/node.h"
#include "kiln/dtype.h"

namespace kiln::ref {

using Shape = std::vector<int64_t>;

// A dense row-major value. Floats live in `f` as double; integers and bools live in `i` as int64,
// wrapped to the dtype's width (u64 stores its bits; bool is 0/1).
struct Array {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<double> f;   // used when is_float(dtype)
  std::vector<int64_t> i;  // used otherwise
  int64_t numel() const;
  double at(int64_t k) const;  // element k as double (u64 read as unsigned)
};

// Evaluates n. Nodes whose `buffer` member is set (realized, or BUFFER) are read from it instead of
// recomputed when use_realized is true; BUFFER nodes are always read from their buffer.
// Throws kiln::Error (naming op, shapes and dtypes) for kernel-level ops and unsupported cases.
Array evaluate(const ir::NodeRef& n, bool use_realized = true);
// Evaluates several roots, sharing the work on common subgraphs.
std::vector<Array> evaluate(const std::vector<ir::NodeRef>& roots, bool use_realized = true);

}  // namespace kiln::ref
