// Scheduler: decides which tensor nodes are realized (kernel boundaries: fusion) and builds each
// kernel's AST, a SINK of STOREs whose values and indices are scalar expressions over RANGEs.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/node.h"

namespace kiln::schedule {

struct Kernel {
  ir::NodeRef ast;                   // SINK(STORE(DEFINE_GLOBAL i, index, value) ...)
  std::vector<ir::NodeRef> outputs;  // tensor nodes this kernel realizes: DEFINE_GLOBAL 0..n-1
  std::vector<ir::NodeRef> inputs;   // realized tensor nodes it reads: DEFINE_GLOBAL n..
  std::vector<std::string> why;      // with ScheduleOptions::explain: why each output is realized
  // Set for an INDEX_COPY kernel: output 0 is this realized node's buffer, into which the kernel
  // stores only the new slices (its loops run over them); it reads nothing else of it.
  ir::NodeRef in_place;
  // A kernel with symbolic sizes: its VARs' values (ir::vars_of order) in this realize, set with its
  // sizes' argument (engine/symbolic.cpp).
  std::vector<int64_t> var_values;
};

struct Schedule {
  std::vector<Kernel> kernels;     // in dependency order
  std::vector<ir::NodeRef> empty;  // realized nodes with no elements (no kernel needed)
};

// The most nodes a kernel fuses along one path: a longer chain is cut by a realize point, so that
// kernel ASTs and the passes over them stay this deep (tensors are realized at half this depth
// already, see frontend::kMaxLazyDepth).
constexpr uint32_t kMaxFusedDepth = 2000;
// The most reduces a kernel nests one inside the other (layernorm and softmax nest two).
constexpr uint32_t kMaxNestedReduces = 8;

// Nodes that become buffers, given the roots to realize (the fusion decision, see fusion.cpp), and
// nodes that must be realized besides (`forced`). With `why`, each point's reason is recorded there.
std::vector<ir::NodeRef> realize_points(const std::vector<ir::NodeRef>& roots,
                                        const std::vector<ir::NodeRef>& forced = {},
                                        std::unordered_map<const ir::Node*, std::string>* why = nullptr);
// Whether a node shared by `consumers` kernels is cheaper stored once than recomputed in each.
bool store_is_cheaper(int64_t consumers, int64_t input_bytes_per_elem, int64_t output_bytes_per_elem);

struct ScheduleOptions {
  // A GEMM library runs the matmuls it can (the device has one): a large matmul that a kernel
  // fuses with work the library cannot do is split off, its operands and result realized
  // (library_gemm.cpp), so the library runs it and the fused work gets kernels of its own.
  bool library_gemm = false;
  bool explain = false;  // fill Kernel::why (the compiler viewer, KILN_VIZ)
};
Schedule make_schedule(const std::vector<ir::NodeRef>& roots, const ScheduleOptions& options = {});

// Horizontal fusion (horizontal_fusion.cpp): elementwise kernels with no data between them (an
// optimizer's updates, one per parameter), each one flat loop over contiguous outputs of at least 2
// elements, become one kernel whose segments run one after another, each over every thread of the
// launch (a CPU thread's part of the flat loop; a GPU grid-stride loop): one launch instead of many
// small ones that cannot fill the device. A member runs where the group's last member ran (nothing
// reads its outputs before that). Cost rule: a segment costs each thread one loop entry, so a group
// takes up to kMaxSegments; and up to kMaxSegmentNodes AST nodes, which bounds its source and the
// compile time (an AdamW update is about 60 nodes).
constexpr int64_t kMaxSegments = 64, kMaxSegmentNodes = 6000;
Schedule fuse_horizontally(Schedule s);

// The nodes to realize so that each large matmul under roots is a kernel the GEMM library runs
// (library_gemm.cpp), and, given a schedule, more for the kernels that still do not match.
std::vector<ir::NodeRef> library_gemm_plan(const std::vector<ir::NodeRef>& roots);
std::vector<ir::NodeRef> library_gemm_points(const Schedule& s);
// Whether the library computes point g, a gelu of the matmul result p, in p's kernel (p written as
// its aux matrix, GELU_AUX), p reading the realized nodes and points `inputs`.
bool library_gelu_aux(const ir::NodeRef& p, const ir::NodeRef& g,
                      const std::unordered_set<const ir::Node*>& inputs);

bool is_realized(const ir::NodeRef& n);  // BUFFER, or already computed into a buffer
// Row structure: a reduce over the last axis only (keepdim), or an expand of that axis only.
bool row_reduce(const ir::NodeRef& n);
bool row_expand(const ir::NodeRef& n);

}  // namespace kiln::schedule
