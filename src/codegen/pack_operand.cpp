// PACK (CPU): a matmul operand read along the reduce with unit stride but across the output's last
// loop with a long stride (x @ w.T, q @ k.T) is copied first into a per-thread scratch laid out with
// that output loop innermost, so the register tiles (upcast_reduce_output) load it as vectors.
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

std::vector<NodeRef> ranges_in(const NodeRef& n) {
  std::vector<NodeRef> r;
  for (auto& x : ir::toposort({n}))
    if (x->op == Op::RANGE) r.push_back(x);
  std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  return r;
}

// The constant step of index idx when range r steps by one, or nullopt.
std::optional<int64_t> step_of(const NodeRef& idx, const NodeRef& r) {
  NodeRef s = ir::simplify(ir::substitute(idx, {{r.get(), r + 1}}) + idx * -1);
  if (!s->is_const()) return std::nullopt;
  return s->ival();
}

}  // namespace

Packed pack_operand(const NodeRef& ast, std::vector<std::string>& log) {
  std::vector<NodeRef> order = ir::toposort({ast}), g;
  int64_t next_global = 0, next_id = 0;
  std::vector<NodeRef> reduces;
  for (auto& n : order) {
    if (n->op == Op::RANGE && n->arg[2] == ir::kGlobalRange) g.push_back(n);
    if (n->op == Op::RANGE) next_id = std::max(next_id, n->arg[0] + 1);
    if (n->op == Op::DEFINE_GLOBAL) next_global = std::max(next_global, n->arg[0] + 1);
    if (n->op == Op::REDUCE) reduces.push_back(n);
  }
  std::sort(g.begin(), g.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  if (g.size() < 2 || reduces.size() != 1 || reduces[0]->arg[0] != static_cast<int64_t>(Op::ADD))
    return {ast};
  const NodeRef &red = reduces[0], &n = g.back();
  if (n->arg[1] % kMinTileCols != 0) return {ast};  // no register tile would read the copy
  std::set<const Node*> written, red_ranges;
  for (auto& x : order)
    if (x->op == Op::STORE) written.insert(x->src[0].get());
  for (size_t i = 1; i < red->src.size(); i++) red_ranges.insert(red->src[i].get());
  // the output is stored along n with unit stride (else no tile takes n as its vector lanes)
  for (auto& x : order)
    if (x->op == Op::STORE && moves_with(x->src[1], n) && step_of(x->src[1], n) != 1) return {ast};
  // the one load of the reduce's body that moves with n
  NodeRef load;
  for (auto& x : ir::toposort({red->src[0]}))
    if (x->op == Op::LOAD && moves_with(x, n)) {
      if (load) return {ast};
      load = x;
    }
  if (!load || written.count(load->src[0].get())) return {ast};
  auto sn = step_of(load->src[1], n);
  if (!sn || *sn == 1 || *sn == 0) return {ast};
  // the load moves with reduce loops, n, and a prefix g[0..p) of the output loops (the pack is made
  // inside those, once for all steps of the loops between them and n)
  std::vector<NodeRef> packed;  // the reduce loops it moves with, then n
  size_t p = 0;
  for (auto& r : ranges_in(load)) {
    if (red_ranges.count(r.get())) {
      packed.push_back(r);
      continue;
    }
    if (r == n) continue;
    if (r->arg[2] != ir::kGlobalRange || r != g[p]) return {ast};
    p++;
  }
  // the innermost reduce loop it moves with, k, steps through memory by one
  if (p + 1 >= g.size() || packed.empty() || step_of(load->src[1], packed.back()) != 1) return {ast};
  int64_t reuse = 1, elems = 1;
  for (size_t i = p; i + 1 < g.size(); i++) reuse *= g[i]->arg[1];
  packed.push_back(n);
  for (auto& r : packed) elems *= r->arg[1];
  if (reuse < kPackMinReuse || elems * dtype_size(load->dtype) > kPackMaxBytes) return {ast};
  // scratch[packed index, n innermost] = the load, filled by loops of their own (kPackRange); k and
  // n in square blocks where they divide, so that the copy reads and writes whole cache lines
  NodeRef scratch = ir::make(Op::DEFINE_GLOBAL, load->dtype, {}, {}, {next_global});
  NodeRef at = ir::const_int(0), pat = ir::const_int(0);
  std::unordered_map<const Node*, NodeRef> to_pack;
  auto pack_range = [&](int64_t size) { return ir::range_of_kind(next_id++, size, ir::kPackRange); };
  for (size_t i = 0; i + 2 < packed.size(); i++) to_pack[packed[i].get()] = pack_range(packed[i]->arg[1]);
  const NodeRef& k = packed[packed.size() - 2];
  int64_t nk = k->arg[1], nn = n->arg[1], b = nk % kPackBlock == 0 && nn % kPackBlock == 0 ? kPackBlock : 1;
  NodeRef ko = pack_range(nk / b), no = pack_range(nn / b), ki = pack_range(b), ni = pack_range(b);
  to_pack[k.get()] = ko * b + ki;
  to_pack[n.get()] = no * b + ni;
  for (auto& r : packed) {
    at = at * r->arg[1] + r;
    pat = pat * r->arg[1] + to_pack.at(r.get());
  }
  NodeRef fill =
      ir::make(Op::STORE, load->dtype, {}, {scratch, ir::simplify(pat), ir::substitute(load, to_pack)});
  NodeRef use = ir::make(Op::LOAD, load->dtype, {}, {scratch, ir::simplify(at)});
  NodeRef body = ir::substitute(ast, {{load.get(), use}});
  std::vector<NodeRef> src = body->src;
  src.push_back(fill);
  std::string what = "PACK";
  for (size_t i = 0; i < packed.size(); i++) what += (i ? "x" : " ") + std::to_string(packed[i]->arg[1]);
  log.push_back(what);
  return {ir::make(Op::SINK, body->dtype, body->shape, src, body->arg), elems * dtype_size(load->dtype)};
}

}  // namespace kiln::codegen
