// The attention kernel in a schedule: an ATTENTION node is a kernel of its own that reads its operands
// where they lie in memory, as strided views (offset, a stride per dim) of realized buffers, such
// as the heads of a fused qkv projection transposed to (B, H, T, D). Its kernel AST is
// SINK(ATTENTION(DEFINE_GLOBAL q, DEFINE_GLOBAL k, DEFINE_GLOBAL v, ...)) with its layout
// (ir/attention_layout.h) as args and the scale as fval; the output (DEFINE_GLOBAL 0) is contiguous.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/attention_layout.h"
#include "ir/node.h"

namespace kiln::schedule {

// A chain of movement ops (RESHAPE, PERMUTE, EXPAND, SHRINK) over `base`, read as base's memory at
// offset + sum(index[i] * strides[i]).
struct StridedView {
  ir::NodeRef base;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};
// The view n is of the first node under it that is not a movement op or for which `stop` holds
// (a realized node); nullopt when the chain cannot be strided (a reshape that splits a permuted dim,
// a pad, a flip).
std::optional<StridedView> strided_view(const ir::NodeRef& n,
                                        const std::function<bool(const ir::NodeRef&)>& stop);
// Whether the attention kernel reads such a view of an operand of `dtype` as it is: q, k, v or dO
// (..., T, D) with D contiguous and every row 16-byte aligned; lse and delta (f32) in any layout.
bool attention_reads(const StridedView& v, DType dtype);

// Whether attention nodes a and b are the forward's output and its log-sum-exp over the same
// operands (one kernel computes both).
bool attention_partners(const ir::Node& a, const ir::Node& b);
// The kernel AST of the attention nodes `outs` (one node, or the output and its log-sum-exp) whose
// operands are views of `bases` (global outs.size() + i reads bases[i]), and the bases; `stop` as in
// strided_view.
ir::NodeRef attention_ast(const std::vector<ir::NodeRef>& outs,
                          const std::function<bool(const ir::NodeRef&)>& stop,
                          std::vector<ir::NodeRef>& bases);

}  // namespace kiln::schedule
