// Layer norm kernels in a schedule (see layer_norm_kernel.h).
#include "schedule/layer_norm_kernel.h"

#include "ir/layer_norm_parts.h"

namespace kiln::schedule {

using ir::NodeRef;
using ir::Op;

bool layer_norm_partners(const ir::Node& a, const ir::Node& b) {
  return a.op == Op::LAYER_NORM && b.op == Op::LAYER_NORM && a.src == b.src && a.fval == b.fval &&
         ir::is_forward(ir::layer_norm_part(a.arg)) == ir::is_forward(ir::layer_norm_part(b.arg));
}

NodeRef layer_norm_ast(const std::vector<NodeRef>& outs) {
  const std::vector<NodeRef>& src = outs.at(0)->src;
  std::vector<NodeRef> globals, parts;
  for (size_t i = 0; i < src.size(); i++)
    globals.push_back(ir::make(Op::DEFINE_GLOBAL, src[i]->dtype, src[i]->shape, {},
                               {static_cast<int64_t>(outs.size() + i)}));
  for (const NodeRef& o : outs)
    parts.push_back(ir::make(Op::LAYER_NORM, o->dtype, o->shape, globals, o->arg, o->fval));
  return ir::make(Op::SINK, outs[0]->dtype, {}, parts);
}

}  // namespace kiln::schedule
