// Fusion decision: which nodes are realized into buffers. Elementwise and movement ops fuse into
// their consumers; a reduce fuses its producers and elementwise consumers, and is realized when its
// result would be recomputed (broadcast by an EXPAND, nested in another reduce, or shared by
// kernels); shared elementwise work is realized when storing it moves fewer bytes than recomputing
// (or its one full-size operand, where it only widens that by broadcasts of realized values: x -
// mean stores x).
#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "schedule/attention_layout.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

using ir::Node;
using ir::NodeRef;
using ir::Op;

bool is_realized(const NodeRef& n) { return n->op == Op::BUFFER || n->buffer != nullptr; }

bool store_is_cheaper(int64_t consumers, int64_t input_bytes_per_elem, int64_t output_bytes_per_elem) {
  // recompute: every consumer kernel reads the node's inputs again.
  // store: one kernel reads the inputs once and writes the node, each consumer reads it back.
  int64_t recompute = consumers * input_bytes_per_elem;
  int64_t store = input_bytes_per_elem + output_bytes_per_elem * (1 + consumers);
  return recompute > store;
}

namespace {

bool grows(const NodeRef& n) { return n->op == Op::EXPAND && n->numel() > n->src[0]->numel(); }

}  // namespace

// A reduce over a row that the same kernel broadcasts back over the row (a mean, a softmax's max and
// sum) is computed once per row in that kernel: the linearizer places it before the loop over the
// row, so nothing is recomputed per element.
bool row_reduce(const NodeRef& n) {
  return n->op == Op::REDUCE && n->arg.size() == 2 && !n->shape.empty() &&
         n->arg[1] == static_cast<int64_t>(n->shape.size()) - 1;
}
bool row_expand(const NodeRef& n) {
  if (n->op != Op::EXPAND || n->shape.empty()) return false;
  const auto& in = n->src[0]->shape;
  size_t last = n->shape.size() - 1;
  for (size_t i = 0; i < last; i++)
    if (in[i] != n->shape[i]) return false;
  return in[last] == 1;
}

namespace {

// Bytes per output element that computing n reads from realized buffers (broadcast reads are free).
int64_t input_bytes(const NodeRef& n, const std::unordered_set<const Node*>& points) {
  int64_t total = 0;
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> stack{n};
  while (!stack.empty()) {
    NodeRef x = stack.back();
    stack.pop_back();
    if (!seen.insert(x.get()).second) continue;
    if (x != n && (is_realized(x) || points.count(x.get()))) {
      total += dtype_size(x->dtype);
      continue;
    }
    if (grows(x)) continue;
    for (auto& s : x->src) stack.push_back(s);
  }
  return total;
}

// Elementwise work worth storing rather than recomputing many times: a transcendental or a few ops.
bool costly_to_recompute(const NodeRef& n, const std::unordered_set<const Node*>& points) {
  int ops = 0;
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> stack{n};
  while (!stack.empty() && ops < 4) {
    NodeRef x = stack.back();
    stack.pop_back();
    if (!seen.insert(x.get()).second || (x != n && (is_realized(x) || points.count(x.get())))) continue;
    if (x->op == Op::EXP2 || x->op == Op::LOG2 || x->op == Op::SIN || x->op == Op::SQRT || x->op == Op::RECIP)
      ops += 4;
    else if (ir::is_elementwise(x->op) && x->op != Op::CAST)
      ops += 1;
    if (x->op != Op::REDUCE)
      for (auto& s : x->src) stack.push_back(s);
  }
  return ops >= 4;
}

// A kernel nesting more than kMaxFusedDepth fused nodes is cut (at a node that does not broadcast),
// whatever built the graph. So is one nesting more than kMaxNestedReduces reduces each over the one
// before (a row reduce broadcast back, as x - x.mean(-1) repeated), which would compute each level
// again inside every reduce above it: the reduce's source is realized, or, where that source is a
// broadcast, the reduce above the limit itself. Depths count only the nodes fused into one kernel (a
// realize point starts its consumers afresh), so a cut never lands where the sharing rules above
// already end the kernel. Returns whether it added a point.
template <class Add>
bool cut_deep_kernels(const std::vector<NodeRef>& order, const std::unordered_set<const Node*>& pending,
                      const std::unordered_set<const Node*>& in_points, Add&& add) {
  struct Nest {
    uint32_t nodes = 0, reduces = 0;  // on the longest paths down inside the kernel
  };
  std::unordered_map<const Node*, Nest> nest;
  bool added = false;
  for (auto& n : order) {
    if (!pending.count(n.get())) continue;  // realized before this schedule
    if (auto it = nest.find(n->src.empty() ? nullptr : n->src[0].get());
        n->op == Op::REDUCE && it != nest.end() && it->second.reduces >= kMaxNestedReduces &&
        !grows(n->src[0])) {
      add(n->src[0],
          [] { return std::string("a chain of reduces nested deeper than the limit is cut here"); });
      nest.erase(it);
      added = true;
    }
    Nest d{1, 0};
    for (auto& s : n->src)
      if (auto it = nest.find(s.get()); it != nest.end())
        d = {std::max(d.nodes, it->second.nodes + 1), std::max(d.reduces, it->second.reduces)};
    d.reduces += n->op == Op::REDUCE;
    if (in_points.count(n.get())) continue;  // a kernel output: its consumers read it from memory
    if (n->op == Op::REDUCE && d.reduces > kMaxNestedReduces) {  // its source broadcasts: cut here
      add(n, [] { return std::string("a chain of reduces nested deeper than the limit is cut here"); });
      added = true;
    } else if (d.nodes > kMaxFusedDepth && !grows(n)) {
      add(n, [] { return std::string("a fused chain deeper than the limit is cut here"); });
      added = true;
    } else {
      nest[n.get()] = d;
    }
  }
  return added;
}

// A value that repeats a smaller one already computed: a broadcast of work on buffers and realize
// points (a mean realized anyway), or elementwise work on such broadcasts and constants. A broadcast
// of work still to do (a mean only this value needs) is not: storing the value computes it once.
bool broadcast(const NodeRef& n, const std::unordered_set<const Node*>& points, int depth = 0) {
  if (depth > 8) return false;
  if (grows(n)) {
    std::vector<NodeRef> stack{n->src[0]};
    for (int seen = 0; !stack.empty(); seen++) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (is_realized(x) || points.count(x.get()) || x->op == Op::CONST) continue;
      if (seen > 16 || x->op == Op::REDUCE || !(ir::is_elementwise(x->op) || ir::is_movement(x->op)))
        return false;
      stack.insert(stack.end(), x->src.begin(), x->src.end());
    }
    return true;
  }
  if (!ir::is_elementwise(n->op)) return false;
  bool any = false;
  for (auto& s : n->src) {
    if (s->op == Op::CONST) continue;
    if (!broadcast(s, points, depth + 1)) return false;
    any = true;
  }
  return any;
}

// The one operand of elementwise n that is neither a broadcast nor a constant, where it is
// elementwise work of n's shape and n only widens it by broadcasts (x - mean: x) or is unary work on
// it (a cast); nullptr otherwise.
NodeRef full_operand(const NodeRef& n, const std::unordered_set<const Node*>& points) {
  if (!ir::is_elementwise(n->op)) return nullptr;
  NodeRef full;
  bool widened = false;
  for (auto& s : n->src) {
    if (s->op == Op::CONST) continue;
    if (broadcast(s, points)) {
      widened = true;
      continue;
    }
    if (full) return nullptr;
    full = s;
  }
  bool ok =
      full && (widened || n->src.size() == 1) && full->shape == n->shape && ir::is_elementwise(full->op);
  return ok ? full : nullptr;
}

// A one-hot mask: an index compared with a range (x == arange(n), written (x != i) xor true). Kept in
// the kernels that read it, where the lowering folds a sum over it into a load or a scatter-add.
bool onehot_mask(const NodeRef& n) {
  auto iota = [](NodeRef x) {
    while (ir::is_movement(x->op) || x->op == Op::CAST) x = x->src[0];
    return x->op == Op::IOTA;
  };
  NodeRef ne = n;
  if (n->op == Op::XOR)
    for (auto& s : n->src)
      if (s->op == Op::CMPNE) ne = s;
  return ne->op == Op::CMPNE && (iota(ne->src[0]) || iota(ne->src[1]));
}

// The dim of `top` along which the iota below it (reached through `path`, views and casts from top
// down) varies, mapped up through the views; -1 where a reshape hides it.
int64_t dim_up(const std::vector<NodeRef>& path, int64_t d) {
  for (auto it = path.rbegin(); it != path.rend() && d >= 0; ++it) {
    const NodeRef& n = *it;
    if (n->op == Op::PERMUTE) {
      int64_t from = d;
      d = -1;
      for (size_t i = 0; i < n->arg.size(); i++)
        if (n->arg[i] == from) d = static_cast<int64_t>(i);
    } else if (n->op == Op::RESHAPE) {  // the dim of the same size and the same elements inside it
      const auto &in = n->src[0]->shape, &out = n->shape;
      int64_t inner = 1;
      for (size_t i = static_cast<size_t>(d) + 1; i < in.size(); i++) inner *= in[i];
      int64_t size = in[static_cast<size_t>(d)], acc = 1;
      d = -1;
      for (size_t j = out.size(); j-- > 0; acc *= out[j])
        if (acc == inner && out[j] == size) d = static_cast<int64_t>(j);
    }
  }
  return d;
}

// The dim of mask c (a one-hot comparison x == iota, through views) along which its iota varies; -1
// if c is no such mask or the dim is hidden.
int64_t onehot_dim(NodeRef c) {
  std::vector<NodeRef> path;
  while (ir::is_movement(c->op) || c->op == Op::CAST) path.push_back(c), c = c->src[0];
  if (!onehot_mask(c)) return -1;
  NodeRef ne = c->op == Op::XOR ? (c->src[0]->op == Op::CMPNE ? c->src[0] : c->src[1]) : c;
  for (auto& side : ne->src) {
    std::vector<NodeRef> down;
    NodeRef x = side;
    while (ir::is_movement(x->op) || x->op == Op::CAST) down.push_back(x), x = x->src[0];
    if (x->op != Op::IOTA) continue;
    std::vector<NodeRef> all = path;
    all.insert(all.end(), down.begin(), down.end());
    return dim_up(all, x->arg[0]);
  }
  return -1;
}

// A sum over a one-hot selection along a dim it keeps: sum over r of where(x(r) == iota(v) & ..,
// y, 0) (times factors). Its own kernel, so that nothing stored with it (a tied embedding's
// gradient adds a matmul to it) keeps the lowering from turning it into a scatter-add.
bool scatter_sum(const NodeRef& n) {
  if (n->op != Op::REDUCE || n->arg[0] != static_cast<int64_t>(Op::ADD)) return false;
  NodeRef x = n->src[0];
  while (x->op == Op::CAST || x->op == Op::MUL)
    x = x->op == Op::CAST || x->src[0]->op == Op::WHERE || x->src[0]->op == Op::MUL ? x->src[0] : x->src[1];
  if (x->op != Op::WHERE) return false;
  std::vector<NodeRef> conds{x->src[0]};
  while (!conds.empty()) {
    NodeRef c = conds.back();
    conds.pop_back();
    if (c->op == Op::AND) {
      conds.insert(conds.end(), c->src.begin(), c->src.end());
      continue;
    }
    int64_t d = onehot_dim(c);
    if (d >= 0 && std::find(n->arg.begin() + 1, n->arg.end(), d) == n->arg.end()) return true;
  }
  return false;
}

}  // namespace

std::vector<NodeRef> realize_points(const std::vector<NodeRef>& roots, const std::vector<NodeRef>& forced,
                                    std::unordered_map<const Node*, std::string>* why) {
  std::vector<NodeRef> points;
  std::unordered_set<const Node*> in_points;
  // `reason` is called only when the caller asked why (KILN_VIZ)
  auto add = [&](const NodeRef& n, auto&& reason) {
    if (is_realized(n) || !in_points.insert(n.get()).second) return;
    points.push_back(n);
    if (why) (*why)[n.get()] = reason();
  };
  auto says = [](const char* text) { return [text] { return std::string(text); }; };
  for (auto& r : roots) add(r, says("a root of the realize"));
  for (auto& f : forced) add(f, says("an operand or result of a GEMM library matmul"));
  std::vector<NodeRef> order = ir::toposort(roots, false);
  std::unordered_map<const Node*, size_t> topo;
  for (size_t i = 0; i < order.size(); i++) topo[order[i].get()] = i;
  // what is still to compute (nothing below a realized node, whose sources the rewrites never saw):
  // contiguous() is a kernel output; an attention node is a kernel of its own, reading q, k and v
  // from memory
  std::unordered_set<const Node*> seen;
  for (std::vector<NodeRef> stack(roots.begin(), roots.end()); !stack.empty();) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (is_realized(n) || !seen.insert(n.get()).second) continue;
    for (auto& s : n->src) stack.push_back(s);
    if (n->op == Op::CONTIGUOUS) add(n, says("contiguous() is always a kernel output"));
    if (scatter_sum(n)) add(n, says("a one-hot sum along a kept dim: a kernel of its own, a scatter-add"));
    if (n->op == Op::INDEX_COPY)
      add(n, says("a slice write into its destination's buffer (in place): a kernel of its own"));
    if (n->op == Op::LAYER_NORM) {  // a runner's kernel, reading its sources as whole buffers
      add(n, says("layer norm is a kernel of its own"));
      for (auto& s : n->src) add(s, says("read by layer norm from memory"));
      continue;
    }
    if (n->op != Op::ATTENTION) continue;
    add(n, says("attention is a kernel of its own"));
    for (auto& s : n->src) {
      auto v = strided_view(s, is_realized);
      bool view = v && attention_reads(*v, s->dtype);  // else a contiguous copy
      add(view ? v->base : s,
          says(view ? "read by attention through a strided view" : "read by attention as a contiguous copy"));
    }
  }
  // owners: for each unrealized node, the realize points whose kernels would compute it. Each
  // point's walk is kept between rounds: a round walks again only the points whose kernels computed
  // a node that has become a point since (any other walk would visit the same nodes and add nothing),
  // so a large graph costs the changed walks per round, not the whole graph.
  std::unordered_map<const Node*, std::vector<size_t>> owners;
  std::unordered_map<const Node*, NodeRef> keep;
  std::vector<std::vector<const Node*>> walked;  // per point: the nodes its kernel computes
  std::vector<char> dirty;                       // per point: walk it (again) this round
  size_t marked = 0;                             // points whose owners were marked dirty
  for (bool changed = true; changed;) {
    changed = false;
    for (; marked < points.size(); marked++)
      if (auto it = owners.find(points[marked].get()); it != owners.end())
        for (size_t q : it->second) dirty[q] = 1;
    for (size_t pi = 0; pi < points.size(); pi++) {
      if (pi >= walked.size()) walked.emplace_back(), dirty.push_back(1);  // a new point
      if (!dirty[pi]) continue;
      dirty[pi] = 0;
      for (const Node* n : walked[pi]) {
        auto& own = owners[n];
        own.erase(std::find(own.begin(), own.end(), pi));
      }
      walked[pi].clear();
      NodeRef p = points[pi];
      // path flags from the kernel's output down: kReplicated (under a reduce or a broadcast),
      // kInReduce, kBroadcastInReduce (broadcast below a reduce: recomputed per reduce step and lane)
      // kRowOnly: all replication so far is row structure (see row_reduce); kViewed: a movement op
      // lies between the kernel's output and here, so its loops need not follow the rows
      enum : uint64_t { kReplicated = 1, kInReduce = 2, kBroadcastInReduce = 4, kRowOnly = 8, kViewed = 16 };
      auto below = [&](const NodeRef& n, uint64_t f) {
        bool replicates = n->op == Op::REDUCE || grows(n);
        bool row =
            !(f & kViewed) && (!(f & kReplicated) || (f & kRowOnly)) && (row_reduce(n) || row_expand(n));
        if (replicates) f = row ? f | kRowOnly : f & ~uint64_t{kRowOnly};
        if (!replicates && !ir::is_elementwise(n->op) && n->op != Op::EXPAND && n->op != Op::REDUCE)
          f = (f | kViewed) & ~uint64_t{kRowOnly};
        if (n->op == Op::REDUCE) f |= kReplicated | kInReduce;
        if (grows(n) && !row)
          f |= kReplicated | ((f & kInReduce) ? uint64_t{kBroadcastInReduce} : uint64_t{0});
        else if (grows(n))
          f |= kReplicated;
        return f;
      };
      std::unordered_set<uint64_t> seen;  // (node, flags) pairs
      std::vector<std::pair<NodeRef, uint64_t>> stack;
      for (auto& s : p->src) stack.push_back({s, below(p, 0)});
      while (!stack.empty()) {
        auto [n, flags] = stack.back();
        stack.pop_back();
        if (is_realized(n) || in_points.count(n.get())) continue;
        if (!seen.insert(reinterpret_cast<uint64_t>(n.get()) ^ flags).second) continue;
        if (auto& own = owners[n.get()]; own.empty() || own.back() != pi) {
          own.push_back(pi);
          walked[pi].push_back(n.get());
        }
        keep.emplace(n.get(), n);
        // per output element, unless a row reduce the kernel computes once per row
        bool recomputed_reduce =
            n->op == Op::REDUCE && (flags & kReplicated) && !((flags & kRowOnly) && row_reduce(n));
        // costly elementwise work broadcast into a reduce (a matmul operand that is an activation's
        // gradient, say) would be recomputed once per element of the broadcast dim: store it, unless
        // it is small (a per-row statistic), where an extra kernel costs more than the recompute
        bool recomputed_work = (flags & kBroadcastInReduce) && ir::is_elementwise(n->op) &&
                               n->numel() >= 1024 && costly_to_recompute(n, in_points) && !onehot_mask(n);
        if (recomputed_reduce || recomputed_work) {
          add(n, [&] {
            if (recomputed_work)
              return "costly elementwise work (" + std::to_string(n->numel()) +
                     " elements) broadcast into a reduce: recomputed per reduce step";
            return std::string((flags & kInReduce) ? "a reduce inside another reduce"
                                                   : "a reduce broadcast by an EXPAND") +
                   ": recomputed per output element if fused";
          });
          changed = true;
          continue;
        }
        for (auto& s : n->src) stack.push_back({s, below(n, flags)});
      }
    }
    if (changed) continue;
    // realize one shared node per round, the one nearest the consumers: it changes the sharing below it
    // (candidates nearest first: the costlier test runs only until one passes)
    std::vector<std::pair<size_t, const Node*>> shared;
    for (auto& [raw, own] : owners)
      if (own.size() >= 2 && !in_points.count(raw) && (raw->op == Op::REDUCE || ir::is_elementwise(raw->op)))
        shared.push_back({topo[raw], raw});
    std::sort(shared.begin(), shared.end(), std::greater<>());
    auto worth_storing = [&](const NodeRef& n) {
      auto it = owners.find(n.get());
      return it != owners.end() && it->second.size() >= 2 && !in_points.count(n.get()) &&
             store_is_cheaper(static_cast<int64_t>(it->second.size()), input_bytes(n, in_points),
                              dtype_size(n->dtype));
    };
    NodeRef best;
    for (auto& [t, raw] : shared) {
      const NodeRef& n = keep[raw];
      if (n->op == Op::REDUCE) {
        best = n;
        break;
      }
      // (x - mean) * rstd, with mean and rstd realized, costs what x costs to store, and x serves x's
      // other readers too (the mean): store the deepest such x (a few steps down), and the work on it
      // is recomputed where it is read
      std::vector<NodeRef> chain{n};
      for (NodeRef x; chain.size() < 4 && (x = full_operand(chain.back(), in_points));) chain.push_back(x);
      for (auto x = chain.rbegin(); x != chain.rend() && !best; ++x)
        if (dtype_size((*x)->dtype) <= dtype_size(n->dtype) && worth_storing(*x)) best = *x;
      if (best) break;
    }
    if (best) {
      add(best, [&] {
        int64_t k = static_cast<int64_t>(owners[best.get()].size());
        if (best->op == Op::REDUCE) return "a reduce shared by " + std::to_string(k) + " kernels";
        int64_t in = input_bytes(best, in_points), out = dtype_size(best->dtype);
        return "shared by " + std::to_string(k) + " kernels: store " + std::to_string(in + out * (1 + k)) +
               " B/elem < recompute " + std::to_string(k * in) + " B/elem";
      });
      changed = true;
      continue;
    }
    changed = cut_deep_kernels(order, seen, in_points, add);
  }
  return points;
}

}  // namespace kiln::schedule
