// Scheduling for a GEMM library: fusion puts a matmul into one kernel with its producers (an
// activation computed on the fly, a softmax) and consumers (a scale, a mask, a residual add). Such a
// kernel is not a plain GEMM, so the generated loop nest would run it, far below the library's
// speed. On a device with a library, each large matmul the library can run becomes a kernel of its
// own: its operands and its result are realized (the work around it runs in kernels of its own; the
// bytes they move are small next to the FLOPs), and an operand view the library cannot stride (two
// batch dims that do not merge) is realized as a contiguous copy. Whether the library can run a
// matmul is asked of the matcher itself, on the matmul alone over stand-in buffers.
//
// Two epilogues take a gelu along, so that its input and output are not a round trip through memory
// of their own: the gelu of a matmul's result joins the matmul's kernel as a second output
// (GELU_AUX: the result is kept for the backward), and the gradient through that gelu, x *
// gelu'(h) with x a matmul's result, is the matmul's kernel (DGELU reads h).
#include <algorithm>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/rewrite.h"
#include "schedule/match_matmul.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

using ir::Node;
using ir::NodeRef;
using ir::Op;

bool worth_library_gemm(const GemmDesc& d) {
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
  while (n->op == Op::CAST) n = n->src[0];  // the multiply's own casts (to its compute type)
  bool viewed = false;
  // under the views, a cast is part of the value the GEMM reads (a softmax rounded to bf16): kept
  while (view_or_cast(n) && !(viewed && n->op == Op::CAST)) {
    if (n->op == Op::EXPAND && n->numel() > n->src[0]->numel() && !o.unbroadcast) o.unbroadcast = n->src[0];
    viewed |= n->op != Op::CAST;
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

// The GEMM the library runs for the nodes `outs` once the nodes in `realized` are buffers: they are
// scheduled alone over stand-in buffers (ids below zero, never a real buffer's) and matched; nullopt
// when they are not one kernel the library runs. The answers are kept by the stand-in graph's
// structural hash (the same matmul in every layer and step), up to kKeptAnswers of them: a hash
// shared by another graph could only cost speed (a matmul planned for the library that the
// generated kernel then runs), never a wrong value. A graph with a computed node in it is not kept
// (its hash does not say whether the node has been computed since).
std::optional<GemmDesc> library_desc(const std::vector<NodeRef>& outs,
                                     const std::vector<const Node*>& realized) {
  std::unordered_map<const Node*, NodeRef> subs;
  int64_t id = -100;
  for (const Node* r : realized)
    if (r->op != Op::BUFFER && !r->buffer)
      subs[r] = ir::make_sym(Op::BUFFER, r->dtype, r->shape, {}, {id--, r->device}, r->sym);
  std::vector<NodeRef> alone;
  uint64_t hash = 0;
  for (auto& o : outs) {
    alone.push_back(ir::substitute(o, subs));
    hash = hash * 0x100000001b3ull ^ alone.back()->hash;
  }
  auto order = ir::toposort(alone, false);
  bool keep = std::none_of(order.begin(), order.end(),
                           [](const NodeRef& n) { return n->op != Op::BUFFER && is_realized(n); });
  constexpr size_t kKeptAnswers = 4096;
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::optional<GemmDesc>> answers;
  {
    std::lock_guard<std::mutex> l(mu);
    if (auto it = answers.find(hash); keep && it != answers.end()) return it->second;
  }
  auto ks = make_schedule(alone).kernels;
  std::optional<GemmDesc> desc;
  if (ks.size() == 1)
    if (auto mm = match_matmul(ks[0]); mm && worth_library_gemm(mm->desc)) desc = mm->desc;
  if (!keep) return desc;
  std::lock_guard<std::mutex> l(mu);
  if (answers.size() >= kKeptAnswers) answers.clear();
  answers.emplace(hash, desc);
  return desc;
}

// Whether the library runs matmul m once the nodes in `realized` are buffers.
bool library_runs(const NodeRef& m, const std::vector<NodeRef>& realized) {
  std::vector<const Node*> nodes;
  for (auto& r : realized) nodes.push_back(r.get());
  return library_desc({m}, nodes).has_value();
}

// Whether the library takes the aux matrix as laid out: cuBLASLt needs its rows a multiple of 8
// elements apart. Elsewhere the gelu keeps kernels of its own.
bool aux_fits(const GemmDesc& d) { return d.ld_aux > 0 && d.ld_aux % 8 == 0; }

// The gradient through a gelu that the matmul result r feeds, x * gelu'(h) with x = r, when the
// library computes it as r's epilogue (DGELU); nullptr otherwise. It is the one node that leaves
// the elementwise work of r's shape above r (everything else there is used only inside it); what it
// reads besides r must be buffers or points already planned (`planned`: h), added to `reads`.
NodeRef dgelu_of(const NodeRef& r, const std::vector<NodeRef>& operands,
                 const std::unordered_map<const Node*, std::vector<NodeRef>>& users,
                 const std::unordered_set<const Node*>& roots, const std::unordered_set<const Node*>& planned,
                 std::vector<NodeRef>& reads) {
  auto users_of = [&](const NodeRef& n) -> const std::vector<NodeRef>& {
    static const std::vector<NodeRef> none;
    auto it = users.find(n.get());
    return it == users.end() ? none : it->second;
  };
  NodeRef start = r;  // the result under the linear layer's reshape
  while (!roots.count(start.get()) && users_of(start).size() == 1 && users_of(start)[0]->op == Op::RESHAPE)
    start = users_of(start)[0];
  if (roots.count(start.get())) return nullptr;
  // the elementwise work of start's shape that depends on it (bounded: a gelu's gradient is small)
  constexpr size_t kMaxRegion = 128;
  std::vector<NodeRef> region;
  std::unordered_set<const Node*> in_region{start.get()};
  for (std::vector<NodeRef> stack{start}; !stack.empty();) {
    NodeRef n = stack.back();
    stack.pop_back();
    for (auto& u : users_of(n))
      if (ir::is_elementwise(u->op) && u->shape == start->shape && in_region.insert(u.get()).second) {
        if (region.size() == kMaxRegion) return nullptr;
        region.push_back(u);
        stack.push_back(u);
      }
  }
  // the gradient: a node leaving the region (used outside it) such that the region's nodes below it
  // are used only by each other and it (the largest such: the gelu's gradient, not its cast)
  auto used_only_by = [&](const NodeRef& n, const std::unordered_set<const Node*>& set) {
    const auto& us = users_of(n);
    return !roots.count(n.get()) &&
           std::all_of(us.begin(), us.end(), [&](const NodeRef& u) { return set.count(u.get()) > 0; });
  };
  NodeRef top;
  std::unordered_set<const Node*> below;  // top's region: the nodes from start up to top
  for (auto& c : region) {
    if (used_only_by(c, in_region)) continue;
    std::unordered_set<const Node*> sub{start.get()};
    std::vector<NodeRef> walk{c};
    std::vector<NodeRef> nodes;
    while (!walk.empty()) {
      NodeRef n = walk.back();
      walk.pop_back();
      if (!in_region.count(n.get()) || !sub.insert(n.get()).second) continue;
      nodes.push_back(n);
      walk.insert(walk.end(), n->src.begin(), n->src.end());
    }
    bool closed = used_only_by(start, sub);
    for (auto& n : nodes) closed = closed && (n == c || used_only_by(n, sub));
    if (closed && sub.size() > below.size()) {
      top = c;
      below = std::move(sub);
    }
  }
  if (!top) return nullptr;
  std::erase_if(region, [&](const NodeRef& n) { return !below.count(n.get()); });
  in_region = std::move(below);
  // what the region reads besides start, down to buffers and planned points (a few nodes: h's cast
  // and the gelu's own work on it)
  constexpr size_t kMaxBelow = 256;
  std::vector<NodeRef> stack;
  for (auto& n : region)
    for (auto& src : n->src)
      if (!in_region.count(src.get())) stack.push_back(src);
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> found;
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    if (is_realized(n) || planned.count(n.get())) {
      found.push_back(n);
      continue;
    }
    if (n->op == Op::REDUCE || seen.size() > kMaxBelow) return nullptr;
    stack.insert(stack.end(), n->src.begin(), n->src.end());
  }
  std::vector<const Node*> realized;
  for (auto& o : operands) realized.push_back(o.get());
  for (auto& n : found) realized.push_back(n.get());
  std::optional<GemmDesc> d = library_desc({top}, realized);
  if (!d || d->epilogue != GemmEpilogue::DGelu || !aux_fits(*d)) return nullptr;
  reads.insert(reads.end(), found.begin(), found.end());
  return top;
}

// A bias added to m (its only user adds a vector broadcast along the rows): the library fuses it.
bool bias_epilogue(const NodeRef& m, const std::vector<NodeRef>& users) {
  if (users.size() != 1 || users[0]->op != Op::ADD) return false;
  const NodeRef& other = users[0]->src[0] == m ? users[0]->src[1] : users[0]->src[0];
  return other->op == Op::EXPAND && !m->shape.empty() && other->src[0]->numel() == m->shape.back();
}

// The operands to realize so that the library runs matmul m: their nodes under the views, or,
// where the library cannot stride those views, the views themselves (copies); nullopt when the
// library cannot run m at all (a dtype it lacks, say), so the generated kernel does.
std::optional<std::vector<NodeRef>> operands_to_realize(const NodeRef& m, const Operand& a,
                                                        const Operand& b) {
  if (library_runs(m, {a.base, b.base})) return std::vector<NodeRef>{a.base, b.base};
  if (library_runs(m, {a.unbroadcast, b.unbroadcast}))
    return std::vector<NodeRef>{a.unbroadcast, b.unbroadcast};
  return std::nullopt;
}

}  // namespace

std::vector<NodeRef> library_gemm_plan(const std::vector<NodeRef>& roots) {
  // the nodes still to compute (what is realized keeps the graph it was computed from: not walked)
  std::vector<NodeRef> order;
  std::unordered_map<const Node*, std::vector<NodeRef>> users;
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (is_realized(n) || !seen.insert(n.get()).second) continue;
    order.push_back(n);
    for (auto& s : n->src) {
      users[s.get()].push_back(n);
      stack.push_back(s);
    }
  }
  // a root and what it reshapes are written by the root's kernel already
  std::unordered_set<const Node*> taken;
  for (NodeRef r : roots)
    for (; !is_realized(r) && taken.insert(r.get()).second && r->op == Op::RESHAPE;) r = r->src[0];
  std::vector<NodeRef> out;
  auto add = [&](const NodeRef& n) {
    if (!is_realized(n) && taken.insert(n.get()).second) out.push_back(n);
  };
  struct Result {
    NodeRef node;
    std::vector<NodeRef> operands;
  };
  std::vector<Result> plain;  // results without a bias: the ones a gelu's gradient may take in
  for (auto& m : order) {
    Operand a, b;
    if (!large_matmul(m, a, b)) continue;
    auto operands = operands_to_realize(m, a, b);
    if (!operands) continue;
    for (auto& o : *operands) add(o);
    const auto& us = users[m.get()];
    // the sum as a linear layer uses it: without its reduced dim, plus a bias, rounded to the
    // operands' type (the library's bias epilogue writes that)
    NodeRef sum = us.size() == 1 && us[0]->op == Op::RESHAPE ? us[0] : m;
    const auto& sum_users = users[sum.get()];
    if (bias_epilogue(sum, sum_users)) {
      const NodeRef& plus = sum_users[0];
      const auto& biased = users[plus.get()];
      if (biased.size() == 1 && biased[0]->op == Op::CAST && biased[0]->dtype == a.base->dtype) {
        add(biased[0]);
        // the bias in that type too (the epilogue reads it so), under its views and widening cast
        NodeRef bias = plus->src[0] == sum ? plus->src[1] : plus->src[0];
        while (bias->op == Op::EXPAND || bias->op == Op::RESHAPE ||
               (bias->op == Op::CAST && bias->dtype != a.base->dtype))
          bias = bias->src[0];
        if (bias->dtype == a.base->dtype) add(bias);
      } else {
        add(plus);  // in the sums' own type
      }
      continue;
    }
    // the result as the library writes it: rounded to the operands' type when that is its only use
    // (bf16 scores, not f32 ones)
    NodeRef r = us.size() == 1 && us[0]->op == Op::CAST && us[0]->dtype == a.base->dtype ? us[0] : m;
    if (!is_realized(r) && !taken.count(r.get())) plain.push_back({r, *operands});
    add(r);
  }
  // once every result is planned (h among them): a result that only a gelu's gradient reads is
  // not stored, the gradient is (the library's DGELU epilogue computes it from the sums and h)
  std::unordered_set<const Node*> root_set;
  for (auto& r : roots) root_set.insert(r.get());
  for (const Result& res : plain) {
    std::vector<NodeRef> reads;
    NodeRef top = dgelu_of(res.node, res.operands, users, root_set, taken, reads);
    if (!top) continue;
    out.erase(std::find(out.begin(), out.end(), res.node));
    taken.erase(res.node.get());
    add(top);
    for (auto& n : reads) add(n);
  }
  return out;
}

bool library_gelu_aux(const NodeRef& p, const NodeRef& g, const std::unordered_set<const Node*>& inputs) {
  // in an order of their own (the set's varies by layer), so that every layer asks the same graph
  std::vector<const Node*> in(inputs.begin(), inputs.end());
  std::sort(in.begin(), in.end(), [](const Node* x, const Node* y) {
    return std::tie(x->shape, x->dtype, x->hash) < std::tie(y->shape, y->dtype, y->hash);
  });
  std::optional<GemmDesc> d = library_desc({p, g}, in);
  return d && (d->epilogue == GemmEpilogue::GeluAux || d->epilogue == GemmEpilogue::BiasGeluAux) &&
         aux_fits(*d);
}

std::vector<NodeRef> library_gemm_points(const Schedule& s) {
  std::vector<NodeRef> more;
  std::unordered_set<const Node*> taken;
  for (const Kernel& k : s.kernels) {
    if (auto m = match_matmul(k); m && worth_library_gemm(m->desc)) continue;
    std::unordered_set<const Node*> bound, outs, seen;
    for (auto& in : k.inputs) bound.insert(in.get());
    for (auto& o : k.outputs) outs.insert(o.get());
    auto add = [&](const NodeRef& n) {
      if (!is_realized(n) && !bound.count(n.get()) && !outs.count(n.get()) && taken.insert(n.get()).second)
        more.push_back(n);
    };
    // the kernel's own nodes: from its outputs down to what it reads
    std::vector<NodeRef> stack(k.outputs.begin(), k.outputs.end());
    while (!stack.empty()) {
      NodeRef n = stack.back();
      stack.pop_back();
      if (!seen.insert(n.get()).second || bound.count(n.get()) || is_realized(n)) continue;
      Operand a, b;
      if (large_matmul(n, a, b))
        if (auto operands = operands_to_realize(n, a, b)) {
          for (auto& o : *operands) add(o);
          add(n);
        }
      for (auto& src : n->src) stack.push_back(src);
    }
  }
  return more;
}

}  // namespace kiln::schedule
