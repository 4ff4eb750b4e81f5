// Horizontal fusion, after the schedule is built: independent elementwise kernels, each one flat
// loop over contiguous outputs (an optimizer's per-parameter updates), become one kernel of
// segments (ir::kSegmentRange) that run one after another, each over all threads of the launch.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "ir/rewrite.h"
#include "ir/simplify.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

// A member's stores are built over its own flat loop (segment 0 at offset 0), which becomes its
// segment once the group and the member's place in it are known.
NodeRef member_loop(int64_t numel) { return ir::segment_range(0, numel, 0); }

int64_t index_divisions(const NodeRef& ast) {
  int64_t c = 0;
  for (auto& n : ir::toposort({ast})) c += n->op == Op::IDIV || n->op == Op::MOD;
  return c;
}

// Kernel k's stores as one segment's over its loop `seg` (a flat loop over the outputs, in their
// row-major order), or nothing where k is not a plain elementwise kernel whose output loops
// collapse into that loop without adding index divisions (a broadcast, a transpose).
std::vector<NodeRef> as_segment(const Kernel& k, const NodeRef& seg, int64_t* nodes) {
  const NodeRef& ast = k.ast;
  if (ast->op != Op::SINK || !ast->arg.empty()) return {};  // (arg: symbolic sizes, ir/symbolic.h)
  std::vector<NodeRef> loops;
  *nodes = 0;
  for (auto& n : ir::toposort({ast})) {
    (*nodes)++;
    if (n->op == Op::REDUCE || n->op == Op::ATTENTION || n->op == Op::LAYER_NORM) return {};
    if (n->op == Op::RANGE && n->arg[2] != ir::kGlobalRange) return {};
    if (n->op == Op::RANGE) loops.push_back(n);
    if (n->op == Op::STORE && (n->src.size() != 3 || !n->arg.empty())) return {};
  }
  for (auto& st : ast->src)
    if (st->op != Op::STORE) return {};
  for (auto& o : k.outputs)
    if (o->numel() != seg->arg[1]) return {};
  std::sort(loops.begin(), loops.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
  int64_t numel = 1;
  for (auto& r : loops) numel *= r->arg[1];
  if (numel != seg->arg[1]) return {};
  std::unordered_map<const Node*, NodeRef> subs;
  int64_t stride = numel;
  for (size_t d = 0; d < loops.size(); d++) {
    int64_t size = loops[d]->arg[1];
    stride /= size;
    NodeRef v = stride == 1 ? seg : ir::idiv(seg, stride);
    subs[loops[d].get()] = d == 0 ? v : ir::mod(v, size);
  }
  NodeRef flat = ir::simplify(ir::substitute(ast, subs));
  if (index_divisions(flat) > index_divisions(ast)) return {};
  return flat->src;
}

// One kernel of segments: the members' stores, their globals renumbered (the members' outputs in
// order, then each input once).
Kernel merge(const std::vector<const Kernel*>& members, const std::vector<std::vector<NodeRef>>& stores) {
  Kernel out;
  for (auto* m : members) out.outputs.insert(out.outputs.end(), m->outputs.begin(), m->outputs.end());
  const int64_t outputs = static_cast<int64_t>(out.outputs.size());
  auto global = [](const NodeRef& of, size_t index) {
    return ir::make(Op::DEFINE_GLOBAL, of->dtype, {}, {}, {static_cast<int64_t>(index)});
  };
  std::unordered_map<const Node*, size_t> input_index;
  std::vector<NodeRef> all;
  size_t first_output = 0;
  for (size_t i = 0; i < members.size(); i++) {
    const Kernel& m = *members[i];
    std::unordered_map<const Node*, NodeRef> subs;
    for (size_t o = 0; o < m.outputs.size(); o++)
      subs[global(m.outputs[o], o).get()] = global(m.outputs[o], first_output + o);
    for (size_t j = 0; j < m.inputs.size(); j++) {
      const NodeRef& in = m.inputs[j];
      auto [it, added] = input_index.emplace(in.get(), out.inputs.size());
      if (added) out.inputs.push_back(in);
      subs[global(in, m.outputs.size() + j).get()] = global(in, static_cast<size_t>(outputs) + it->second);
    }
    for (auto& st : stores[i]) all.push_back(ir::substitute(st, subs));
    out.why.insert(out.why.end(), m.why.begin(), m.why.end());
    first_output += m.outputs.size();
  }
  out.ast = ir::make(Op::SINK, all[0]->dtype, {}, all);
  return out;
}

}  // namespace

Schedule fuse_horizontally(Schedule s) {
  const size_t n = s.kernels.size();
  // the first kernel reading each kernel's outputs: a member may run as late as just before it
  std::unordered_map<const Node*, size_t> producer;
  for (size_t k = 0; k < n; k++)
    for (auto& o : s.kernels[k].outputs) producer[o.get()] = k;
  std::vector<size_t> first_reader(n, std::numeric_limits<size_t>::max());
  for (size_t k = 0; k < n; k++)
    for (auto& in : s.kernels[k].inputs)
      if (auto it = producer.find(in.get()); it != producer.end())
        first_reader[it->second] = std::min(first_reader[it->second], k);
  // from the last kernel back: a kernel joins the open group, which runs where its last member is,
  // when nothing up to there reads what it computes; members in schedule order
  struct Group {
    size_t at;
    std::vector<size_t> members;
    std::vector<std::vector<NodeRef>> stores;
    int64_t nodes = 0;
  };
  std::vector<Group> groups;
  for (size_t k = n; k-- > 0;) {
    const Kernel& kern = s.kernels[k];
    int64_t numel = kern.outputs[0]->numel(), nodes = 0;
    if (numel < 2) continue;  // a loop of one step simplifies away: a kernel of its own
    NodeRef seg = member_loop(numel);
    std::vector<NodeRef> stores = as_segment(kern, seg, &nodes);
    if (stores.empty()) continue;
    bool joins = !groups.empty() && first_reader[k] > groups.back().at &&
                 static_cast<int64_t>(groups.back().members.size()) < kMaxSegments &&
                 groups.back().nodes + nodes <= kMaxSegmentNodes;
    if (!joins) groups.push_back({k, {}, {}, 0});
    Group& g = groups.back();
    g.members.insert(g.members.begin(), k);
    g.stores.insert(g.stores.begin(), std::move(stores));
    g.nodes += nodes;
  }
  std::unordered_map<size_t, const Group*> at;
  std::vector<bool> moved(n);
  for (auto& g : groups) {
    if (g.members.size() < 2) continue;
    at[g.at] = &g;
    for (size_t m : g.members) moved[m] = true;
  }
  if (at.empty()) return s;
  Schedule out;
  out.empty = std::move(s.empty);
  for (size_t k = 0; k < n; k++) {
    if (!moved[k]) {
      out.kernels.push_back(std::move(s.kernels[k]));
      continue;
    }
    auto it = at.find(k);
    if (it == at.end()) continue;
    // each member's loop a segment of its own, at its offset in the flat loop
    const Group& g = *it->second;
    std::vector<const Kernel*> members;
    std::vector<std::vector<NodeRef>> stores;
    int64_t offset = 0;
    for (size_t i = 0; i < g.members.size(); i++) {
      const Kernel& m = s.kernels[g.members[i]];
      int64_t numel = m.outputs[0]->numel();
      NodeRef seg = ir::segment_range(static_cast<int64_t>(i), numel, offset);
      std::vector<NodeRef> st;
      for (auto& x : g.stores[i]) st.push_back(ir::substitute(x, {{member_loop(numel).get(), seg}}));
      stores.push_back(std::move(st));
      members.push_back(&m);
      offset += numel;
    }
    out.kernels.push_back(merge(members, stores));
  }
  return out;
}

}  // namespace kiln::schedule
