// The lowering pass list (see passes.h). Each step is one function in its own file.
#include "codegen/passes.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "codegen/flash_attention.h"
#include "codegen/linearize.h"
#include "codegen/opt.h"
#include "codegen/render_c.h"
#include "codegen/scatter_onehot.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

std::string kernel_name(const NodeRef& ast) {
  std::vector<std::pair<int64_t, NodeRef>> g, r;
  int64_t segments = 0, flat = 0;
  for (auto& n : ir::toposort({ast})) {
    if (n->op == Op::RANGE && n->arg[2] == ir::kSegmentRange) {
      segments++;
      flat = std::max(flat, n->arg[3] + n->arg[1]);
    } else if (n->op == Op::RANGE && n->arg[2] != ir::kPackRange) {
      (n->arg[2] == ir::kReduceRange ? r : g).push_back({n->arg[0], n});
    }
  }
  // a horizontally fused kernel: S, its segments, its flat loop
  if (segments > 0) return "S" + std::to_string(segments) + "_" + std::to_string(flat);
  std::sort(g.begin(), g.end());
  std::sort(r.begin(), r.end());
  std::string name = r.empty() ? "E" : "r";
  auto size = [](const NodeRef& n) {
    return ir::is_symbolic_range(*n) ? ir::dim_label(n->src[0]) : std::to_string(n->arg[1]);
  };
  for (auto& [id, n] : g) name += "_" + size(n);
  for (auto& [id, n] : r) name += "_" + size(n);
  if (g.empty() && r.empty()) name += "_1";
  return name;
}

Lowered lower(const NodeRef& ast, Target target, const DeviceLimits& limits) {
  if (ast->src.size() == 1 && ast->src[0]->op == Op::ATTENTION) return lower_attention(ast, target);
  Lowered out;
  NodeRef s = ast;
  int64_t zero_elems = 0;
  bool serial = false;
  int64_t scratch_bytes = 0;
  // a kernel with symbolic loops (ir/symbolic.h): the opts leave those loops alone, and the ones
  // that size their work by a kernel's trip counts (packs, chunked sums) do not run
  const bool symbolic = ir::vars_in_use() && !ir::vars_of(ast).empty();
  if (!settings().noopt) {
    s = fold_onehot_sums(s, out.opts);
    // the GPU's scatter-adds are atomic: their order, so their rounding, varies from run to run
    if (target == Target::CPU || !settings().deterministic) {
      Scatter sc = scatter_onehot_sums(s, target, out.opts);
      s = sc.ast;
      zero_elems = sc.zero_elems;
      serial = sc.serial;
    }
    s = collapse_loops(s, out.opts);
    s = split_reduce_loops(s, out.opts);
    s = collapse_reduce_loops(s, out.opts, target == Target::CUDA);
    s = merge_reduces(s, out.opts);
    if (target == Target::CPU) s = order_output_loops(s, out.opts);
    if (target == Target::CPU && limits.scratch && !serial && !symbolic) {
      Packed pk = pack_operand(s, out.opts);
      s = pk.ast;
      scratch_bytes = pk.scratch_bytes;
    }
    // register tiles for CPU vector units; on the GPU the threads of a block share the work instead
    if (target == Target::CPU) s = upcast_reduce_output(s, register_tile(limits.vector_bytes), out.opts);
    if (target == Target::CPU && !serial && !symbolic) s = dot_lanes(s, limits.vector_bytes, out.opts);
    if (target == Target::CPU && !serial) s = thread_outer_loops(s, limits.cores, out.opts);
  }
  // accuracy, not speed: long sums in chunks (the GPU's block reductions already split them)
  if (target == Target::CPU && !symbolic) s = chunk_long_sums(s, out.opts);
  s = renumber_ranges(s);
  out.program = linearize(s);
  out.program.name = kernel_name(s);
  if (zero_elems > 0) out.program.zero_bytes = zero_elems * dtype_size(out.program.globals.at(0));
  out.program.serial = serial;
  out.program.scratch_bytes = scratch_bytes;
  out.program.hash = s->hash * 31 + (settings().noopt ? 1 : 0) + (target == Target::CUDA ? 2 : 0);
  char hex[24];
  std::snprintf(hex, sizeof hex, "_%012llx",
                static_cast<unsigned long long>(out.program.hash & 0xffffffffffffull));
  out.program.symbol = out.program.name + hex;
  if (target == Target::CUDA) {
    CudaKernel k = render_cuda(out.program, limits);
    out.source = std::move(k.source);
    out.launch = k.launch;
    out.opts.push_back(k.launch.kind == CudaLaunch::Kind::BlockReduce
                           ? "BLOCK_REDUCE(" + std::to_string(k.launch.block) + ")"
                           : "GRID_STRIDE(" + std::to_string(k.launch.block) + ")");
    if (k.launch.group > 1) out.opts.push_back("GROUP_REDUCE(" + std::to_string(k.launch.group) + ")");
  } else {
    out.source = render_c(out.program);
  }
  if (settings().debug >= 5)
    std::cerr << "kiln: kernel " << out.program.name << " AST:\n"
              << ir::dump({s}) << "kiln: kernel " << out.program.name << " linear program:\n"
              << to_string(out.program);
  if (settings().debug >= 4) std::cerr << "kiln: kernel " << out.program.name << " source:\n" << out.source;
  return out;
}

}  // namespace kiln::codegen
