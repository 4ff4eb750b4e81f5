// Scheduling for a GEMM library: fusion puts a matmul into one kernel with its producers (an
// activation computed on the fly, a softmax) and consumers (a scale, a mask, a residual add). Such a
// kernel is not a plain GEMM, so the generated loop nest runs it, far below the library's speed. For
// each large matmul the matcher (match_matmul.h) rejects, the operands that are computed in the
// kernel and the matmul's result become realize points: the library then runs the matmul alone,
// and the work around it runs in kernels of its own (the bytes they move are small next to the
// FLOPs saved).
#include <unordered_set>

#include "schedule/match_matmul.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

using ir::Node;
using ir::NodeRef;
using ir::Op;

bool worth_library_gemm(const runtime::cuda::GemmDesc& d) {
  return d.m >= 64 && d.n >= 64 && d.k >= 64 &&
         static_cast<double>(d.batch) * static_cast<double>(d.m) * static_cast<double>(d.n) *
                 static_cast<double>(d.k) >=
             static_cast<double>(1 << 24);
}

namespace {

bool view_or_cast(const NodeRef& n) {
  return n->op == Op::CAST || n->op == Op::RESHAPE || n->op == Op::PERMUTE || n->op == Op::EXPAND ||
         n->op == Op::SHRINK;
}

// An operand of a matmul: the node under its views and casts (what a GEMM reads from memory), and
// the operand before it is broadcast (realized, a contiguous copy of the operand's view).
struct Operand {
  NodeRef base, unbroadcast;
};

Operand operand_of(NodeRef n) {
  Operand o;
  while (view_or_cast(n)) {
    if (n->op == Op::EXPAND && n->numel() > n->src[0]->numel() && !o.unbroadcast) o.unbroadcast = n->src[0];
    n = n->src[0];
  }
  o.base = n;
  return o;
}

// A sum of products of two broadcast operands (a matmul as the frontend writes it) large enough
// for the library: batch * m * n * k elements and at least 64 along k.
bool large_matmul(const NodeRef& n, Operand& a, Operand& b) {
  if (n->op != Op::REDUCE || n->arg.empty() || n->arg[0] != static_cast<int64_t>(Op::ADD)) return false;
  NodeRef body = n->src[0];
  while (body->op == Op::CAST) body = body->src[0];
  if (body->op != Op::MUL) return false;
  a = operand_of(body->src[0]);
  b = operand_of(body->src[1]);
  int64_t k = 1;
  for (size_t i = 1; i < n->arg.size(); i++) k *= body->shape[static_cast<size_t>(n->arg[i])];
  return a.unbroadcast && b.unbroadcast && k >= 64 &&
         static_cast<double>(body->numel()) >= static_cast<double>(1 << 24);
}

}  // namespace

std::vector<NodeRef> library_gemm_points(const Schedule& s) {
  std::vector<NodeRef> more;
  std::unordered_set<const Node*> taken;
  for (const Kernel& k : s.kernels) {
    if (auto m = match_matmul(k); m && worth_library_gemm(m->desc)) continue;
    std::unordered_set<const Node*> bound;
    for (auto& in : k.inputs) bound.insert(in.get());
    std::unordered_set<const Node*> outs, seen;
    for (auto& o : k.outputs) outs.insert(o.get());
    // first what the kernel computes around its matmuls; once that is all realized and the kernel
    // still does not match, contiguous copies of the operands (views the library cannot stride)
    std::vector<NodeRef> fused, copies;
    auto add = [&](std::vector<NodeRef>& to, const NodeRef& n) {
      if (!is_realized(n) && !bound.count(n.get()) && !outs.count(n.get())) to.push_back(n);
    };
    std::vector<NodeRef> stack(k.outputs.begin(), k.outputs.end());
    while (!stack.empty()) {
      NodeRef n = stack.back();
      stack.pop_back();
      if (!seen.insert(n.get()).second || bound.count(n.get()) || is_realized(n)) continue;
      Operand a, b;
      if (large_matmul(n, a, b)) {
        add(fused, a.base);
        add(fused, b.base);
        if (!outs.count(n.get())) fused.push_back(n);
        add(copies, a.unbroadcast);
        add(copies, b.unbroadcast);
      }
      for (auto& src : n->src) stack.push_back(src);
    }
    for (auto& n : fused.empty() ? copies : fused)
      if (taken.insert(n.get()).second) more.push_back(n);
  }
  return more;
}

}  // namespace kiln::schedule
