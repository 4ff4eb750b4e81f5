// The IR node: one hash-consed type for tensor graphs, kernel ASTs and index expressions.
// Structurally equal nodes are the same object, so CSE is free and `hash` is a content key.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops.h"
#include "kiln/dtype.h"

namespace kiln {
struct Buffer;
// "(2, 3)": declared for users in kiln/tensor.h, defined in ir so every layer prints shapes alike
std::string shape_str(const std::vector<int64_t>& s);
}  // namespace kiln

namespace kiln::ir {

struct Node;
using NodeRef = std::shared_ptr<const Node>;
using Shape = std::vector<int64_t>;

struct Node {
  Op op;
  DType dtype;
  Shape shape;  // tensor-level nodes; empty for scalars and kernel-level nodes
  // Symbolic dims (ir/symbolic.h): empty, or one entry a dim, the I64 expression over VARs that
  // shape[d] is the value of (nullptr where the dim is concrete)
  std::vector<NodeRef> sym;
  std::vector<NodeRef> src;
  std::vector<int64_t> arg;  // op-specific integers (axes, perm, pads, const value bits ...)
  double fval = 0;           // CONST value for float dtypes
  uint64_t hash = 0;         // content hash (BUFFER hashes its id)
  // Where the value lives: -1 for graphs of constants (placed at realize), else Device::code() of
  // the buffers it reads (BUFFER arg[1]). A function of the content, so hash-consing keeps it.
  int8_t device = -1;

  // BUFFER nodes hold their storage; any node may be realized into a buffer (its value, computed).
  mutable std::shared_ptr<Buffer> buffer;
  // Interval bounds of integer expressions, filled in by the simplifier (cached).
  mutable bool has_bounds = false;
  mutable int64_t vmin_ = 0, vmax_ = 0;
  // The longest chain of unrealized nodes from here down, this one included: how deep a kernel
  // computing it would nest. 0 for nodes without sources and for realized ones (see set_buffer).
  mutable std::atomic<uint32_t> depth{0};
  bool interned = false;  // in the hash-consing table (make() sets it)

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // frees a chain of sources of any length with a worklist, not by recursion

  int64_t numel() const;  // never overflows: make() rejects shapes whose product int64 cannot hold
  bool is_const() const { return op == Op::CONST; }
  int64_t ival() const { return arg.empty() ? 0 : arg[0]; }  // CONST int value, RANGE id ...
  std::string str() const;                                   // one-line summary
};

// The number of elements of a shape; nullopt if a dim is negative or the product of the nonzero
// dims overflows int64 (so every stride of the shape fits int64 too, also when a dim is 0).
std::optional<int64_t> checked_numel(const Shape& s);

// Creates (or finds) the unique node with this content.
// A tensor-level node's symbolic dims follow from its sources' (ir/symbolic.h: infer_sym).
NodeRef make(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, std::vector<int64_t> arg = {},
             double fval = 0);
// The same with the symbolic dims given (a dim marked symbolic by Tensor::symbolic).
NodeRef make_sym(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, std::vector<int64_t> arg,
                 std::vector<NodeRef> sym, double fval = 0);
// A CONST that belongs to a device (a code of Device::code()) without being computed: zeros_like of
// a GPU tensor stays a constant the kernels fold, not a buffer filled on the GPU. Other nodes take
// their device from their sources; BUFFERs carry theirs in arg.
NodeRef pinned_const(const NodeRef& c, int8_t device);

// Attaches a node's computed value (nullptr detaches it) and keeps its `depth` in step.
void set_buffer(const Node& n, std::shared_ptr<Buffer> b);

// Scalars and helpers used by every pass.
NodeRef const_int(int64_t v, DType t = DType::I64, Shape shape = {});
NodeRef const_float(double v, DType t, Shape shape = {});
NodeRef const_like(const NodeRef& like, double v);  // same dtype and shape as `like`
double const_value(const NodeRef& n);               // CONST value as double
bool is_const_value(const NodeRef& n, double v);

// Kernel-level index expressions (I64 scalars).
// RANGE arg: {id, size, kind}: an output loop, a reduce loop, or an upcast loop (a short innermost
// loop over lanes that each keep their own accumulator; see codegen/opt.h)
// (or a loop that fills a kernel's scratch before the loops that read it: codegen/opt.h's PACK).
// A segment (arg {id, size, kSegmentRange, offset}) is one part of a horizontally fused kernel
// (schedule/horizontal_fusion.cpp): its stores run over [0, size), which are the elements
// [offset, offset + size) of the kernel's one flat loop; the segments run one after another.
// A symbolic range has its trip count as src[0] (an expression over VARs) and its largest as size.
enum RangeKind : int64_t {
  kGlobalRange = 0,
  kReduceRange = 1,
  kUpcastRange = 2,
  kPackRange = 3,
  kSegmentRange = 4
};
NodeRef range(int64_t id, int64_t size, bool reduce);
NodeRef range_of_kind(int64_t id, int64_t size, RangeKind kind);
NodeRef segment_range(int64_t id, int64_t size, int64_t offset);
NodeRef symbolic_range(int64_t id, const NodeRef& extent, RangeKind kind);
// A range like r (its trip count, symbolic or not) with another id and kind.
NodeRef range_like(const NodeRef& r, int64_t id, RangeKind kind);
inline bool is_symbolic_range(const Node& r) { return !r.src.empty(); }
NodeRef alu(Op op, NodeRef a, NodeRef b);  // result dtype: bool for comparisons, else a's
NodeRef operator+(NodeRef a, NodeRef b);
NodeRef operator*(NodeRef a, NodeRef b);
NodeRef operator+(NodeRef a, int64_t b);
NodeRef operator*(NodeRef a, int64_t b);
NodeRef idiv(NodeRef a, int64_t b);
NodeRef mod(NodeRef a, int64_t b);
NodeRef lt(NodeRef a, int64_t b);
NodeRef ge(NodeRef a, int64_t b);
NodeRef land(NodeRef a, NodeRef b);  // logical and of two bool expressions (nullptr means true)

// Nodes reachable from roots, sources before users. With below_realized = false, the walk does
// not go below a node that holds a buffer (a realized node that kept its graph for autograd): what
// a realize computes.
std::vector<NodeRef> toposort(const std::vector<NodeRef>& roots, bool below_realized = true);
// Whether `target` is n or lies below it.
bool reaches(const NodeRef& n, const Node* target);
// Debug dump of a DAG, one line per node.
std::string dump(const std::vector<NodeRef>& roots);
// Number of interned nodes alive (for tests of the hash-consing table).
size_t live_nodes();

}  // namespace kiln::ir
