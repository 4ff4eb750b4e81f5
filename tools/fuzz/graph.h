// kiln_fuzz's op graphs: a small serializable list of ops over input tensors, built into kiln tensors
// and written out as a standalone C++ program that reproduces a finding.
#pragma once
#include <kiln/kiln.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fuzz {

enum class Op {
  Input,
  Neg,
  Exp,
  Log,
  Sqrt,
  Tanh,
  Sigmoid,
  Relu,
  Abs,
  AddScalar,
  MulScalar,
  Add,
  Sub,
  Mul,
  Div,
  Maximum,
  Minimum,
  Less,
  Greater,
  Equal,
  Where,
  Sum,
  Max,
  Mean,
  Reshape,
  Permute,
  Pad,
  Flip,
  Slice,
  Cat,
  Expand,
  Matmul,
  Cast,
};

struct Node {
  Op op = Op::Input;
  std::vector<int> args;      // indices of earlier nodes
  std::vector<int64_t> ints;  // shape, axes, permutation, pads, or {dim, start, stop, step}
  bool keepdim = false;
  double scalar = 0;           // AddScalar/MulScalar operand, Pad value
  DType dtype = DType::F32;    // Input and Cast dtype
  std::vector<double> values;  // Input values (row-major, exact in dtype)
  double err = 0;              // bound on |kiln - exact| over the elements, set by the generator
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<int> outputs;     // realized together
  bool grad = false;            // loss = sum(outputs[0] * weights), differentiated w.r.t. inputs
  std::vector<double> weights;  // outputs[0]'s elements, exact in its dtype
};

// The indices of the Input nodes, in order.
std::vector<int> input_ids(const Graph& g);

// A leaf tensor holding an Input node's values; in f64 when as_f64.
Tensor make_input(const Node& n, bool as_f64 = false);

// Applies one node to its argument tensors. With as_f64, float casts become casts to f64 (the
// finite-difference check evaluates the graph's exact function).
Tensor apply_node(const Node& n, const std::vector<Tensor>& args, bool as_f64 = false);

// Builds every node from the given leaves (one per Input node, in order).
std::vector<Tensor> build(const Graph& g, const std::vector<Tensor>& leaves, bool as_f64 = false);

// The loss of a gradient graph: sum(outputs[0] * weights).
Tensor loss_of(const Graph& g, const std::vector<Tensor>& nodes, bool as_f64 = false);

// The C++ expression of node `i` (its arguments named t<k>).
std::string node_code(const Graph& g, int i);

struct Expected {
  int node;
  std::vector<double> values;
  std::vector<double> tol;  // per element; integer and bool results compare exactly
};

// A standalone program (public kiln API only) that builds g, realizes it and compares the results
// with `expected` (forward outputs, then one entry per input for the gradients), returning 1 on a
// mismatch.
std::string repro_program(const Graph& g, uint64_t seed, const std::vector<Expected>& forward,
                          const std::vector<Expected>& gradients);

std::string format_value(double v, DType t);
const char* dtype_code(DType t);  // "DType::F32"

}  // namespace kiln::fuzz
