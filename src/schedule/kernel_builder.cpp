// Builds one kernel's AST from the tensor graph: movement ops become index arithmetic over RANGEs,
// PAD becomes a validity mask that gates loads, fused reduces get their own reduce RANGEs.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "ir/simplify.h"
#include "ir/symbolic.h"
#include "kiln/error.h"
#include "schedule/attention_layout.h"
#include "schedule/layer_norm_kernel.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

std::vector<int64_t> strides_of(const ir::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; i--) st[i] = st[i + 1] * s[i + 1];
  return st;
}

NodeRef flat_index(const std::vector<NodeRef>& idx, const ir::Shape& shape) {
  auto st = strides_of(shape);
  NodeRef r = ir::const_int(0);
  for (size_t i = 0; i < idx.size(); i++)
    if (shape[i] != 1) r = r + idx[i] * st[i];
  return r;
}

// The same over n's dims, symbolic ones as their expressions (ir/symbolic.h).
std::vector<NodeRef> strides_of(const std::vector<NodeRef>& dims) {
  std::vector<NodeRef> st(dims.size(), ir::const_int(1));
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; i--)
    st[static_cast<size_t>(i)] =
        ir::simplify(st[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1]);
  return st;
}
NodeRef flat_index(const std::vector<NodeRef>& idx, const NodeRef& n) {
  if (n->sym.empty()) return flat_index(idx, n->shape);
  std::vector<NodeRef> dims = ir::dim_exprs(n), st = strides_of(dims);
  NodeRef r = ir::const_int(0);
  for (size_t i = 0; i < idx.size(); i++)
    if (!ir::is_const_value(dims[i], 1)) r = r + idx[i] * st[i];
  return r;
}
// Dim d of n plus k: a constant, or the symbolic dim's expression plus k.
NodeRef dim_plus(const NodeRef& n, size_t d, int64_t k) {
  if (n->sym.empty() || !n->sym[d]) return ir::const_int(n->shape[d] + k);
  return ir::simplify(n->sym[d] + k);
}
bool concrete_one(const NodeRef& n, size_t d) { return n->shape[d] == 1 && (n->sym.empty() || !n->sym[d]); }

// Source dims [i0, i1) of reshape n (their expressions in_d) indexed from its dims [j0, j1) (out_d):
// their flat index over the group, split again (the first source dim takes no remainder, the last
// no division).
void map_group(const NodeRef& n, const std::vector<NodeRef>& idx, const std::vector<NodeRef>& in_d,
               const std::vector<NodeRef>& out_d, size_t i0, size_t i1, size_t j0, size_t j1,
               std::vector<NodeRef>& sidx) {
  const NodeRef& x = n->src[0];
  if (i1 - i0 == 1 && j1 - j0 == 1) {
    sidx[i0] = idx[j0];
    return;
  }
  NodeRef flat = ir::const_int(0), step = ir::const_int(1);
  for (size_t k = j1; k-- > j0;) {
    if (!concrete_one(n, k)) flat = flat + idx[k] * step;
    step = ir::simplify(step * out_d[k]);
  }
  step = ir::const_int(1);
  for (size_t k = i1; k-- > i0;) {
    NodeRef v = ir::is_const_value(step, 1) ? flat : ir::alu(Op::IDIV, flat, step);
    sidx[k] = concrete_one(x, k) ? ir::const_int(0) : k == i0 ? v : ir::alu(Op::MOD, v, in_d[k]);
    step = ir::simplify(step * in_d[k]);
  }
}

// A reshape's source index over symbolic dims. Dims whose running products meet (in the concrete
// sizes, and as expressions) are mapped group by group, so an index divides by a variable only where
// dims holding it merge or split; where a group's expressions disagree, all dims are one group.
std::vector<NodeRef> reshape_index(const NodeRef& n, const std::vector<NodeRef>& idx) {
  const NodeRef& x = n->src[0];
  const ir::Shape &in = x->shape, &out = n->shape;
  std::vector<NodeRef> in_d = ir::dim_exprs(x), out_d = ir::dim_exprs(n), sidx(in.size());
  auto whole = [&] {
    map_group(n, idx, in_d, out_d, 0, in.size(), 0, out.size(), sidx);
    return sidx;
  };
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    if (i < in.size() && concrete_one(x, i)) {
      sidx[i++] = ir::const_int(0);
      continue;
    }
    if (j < out.size() && concrete_one(n, j)) {
      j++;
      continue;
    }
    if (i == in.size() || j == out.size()) return whole();
    size_t i0 = i, j0 = j;
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj && i < in.size())
        pi *= in[i++];
      else if (pj < pi && j < out.size())
        pj *= out[j++];
      else
        return whole();
    }
    if (pi == 0 ||
        !ir::same_product({in_d.begin() + static_cast<long>(i0), in_d.begin() + static_cast<long>(i)},
                          {out_d.begin() + static_cast<long>(j0), out_d.begin() + static_cast<long>(j)}))
      return whole();
    map_group(n, idx, in_d, out_d, i0, i, j0, j, sidx);
  }
  return sidx;
}

class Builder {
 public:
  // The outputs share the first one's shape (the kernel's output loops) or have dims of 1 in it.
  // Points in `inlined` (row statistics of the outputs' rows) are computed here, not read.
  Builder(const std::unordered_set<const Node*>& points, std::vector<NodeRef> outs,
          const std::unordered_set<const Node*>& inlined)
      : points_(points), inlined_(inlined), outs_(std::move(outs)) {
    for (auto& o : outs_) global_of(o);
  }

  NodeRef build() {
    std::vector<NodeRef> idx;
    int64_t id = 0;
    const NodeRef& o = outs_[0];
    for (size_t d = 0; d < o->shape.size(); d++)
      idx.push_back(concrete_one(o, d)             ? ir::const_int(0)
                    : o->sym.empty() || !o->sym[d] ? ir::range(id++, o->shape[d], false)
                                                   : ir::symbolic_range(id++, o->sym[d], ir::kGlobalRange));
    next_range_ = id;
    std::vector<NodeRef> stores;
    for (auto& out : outs_) {
      // an output with a dim of 1 where the loops have more (a row statistic) is stored once a row
      std::vector<NodeRef> at = idx;
      for (size_t d = 0; d < at.size(); d++)
        if (out->shape[d] == 1 && concrete_one(out, d)) at[d] = ir::const_int(0);
      NodeRef src = out->op == Op::CONTIGUOUS ? out->src[0] : out;
      NodeRef value = render({src, at, nullptr, src == out});
      stores.push_back(ir::make(Op::STORE, out->dtype, {}, {global_of(out), flat_index(at, out), value}));
    }
    NodeRef sink = ir::simplify(ir::make(Op::SINK, outs_[0]->dtype, {}, stores));
    // a kernel with symbolic sizes reads their values from one more argument, after its buffers
    if (ir::vars_in_use() && !ir::vars_of(sink).empty())
      sink = ir::make(Op::SINK, sink->dtype, {}, sink->src, {static_cast<int64_t>(globals_.size())});
    return sink;
  }

  // An INDEX_COPY's kernel: loops over its source's slices, each stored at the position its index
  // gives along the dim, into the destination's buffer (output 0); a position outside the dim is
  // not stored (the STORE's gate), so memory outside the buffer is never written.
  NodeRef build_index_copy() {
    const NodeRef& x = outs_[0];
    const NodeRef &index = x->src[1], &src = x->src[2];
    const auto d = static_cast<size_t>(x->arg[0]);
    std::vector<NodeRef> idx;
    int64_t id = 0;
    for (auto n : src->shape) idx.push_back(n == 1 ? ir::const_int(0) : ir::range(id++, n, false));
    next_range_ = id;
    NodeRef value = render({src, idx, nullptr});
    NodeRef e = render({index, {idx[d]}, nullptr});
    if (e->dtype != DType::I64) e = ir::make(Op::CAST, DType::I64, {}, {e});
    NodeRef inside = ir::land(ir::ge(e, 0), ir::lt(e, x->shape[d]));
    std::vector<NodeRef> at = idx;
    at[d] = e;
    NodeRef store =
        ir::make(Op::STORE, x->dtype, {}, {global_of(x), flat_index(at, x->shape), value, inside});
    return ir::simplify(ir::make(Op::SINK, x->dtype, {}, {store}));
  }

  std::vector<NodeRef> inputs() const {
    return {globals_.begin() + static_cast<long>(outs_.size()), globals_.end()};
  }

 private:
  NodeRef global_of(const NodeRef& n) {
    auto it = global_index_.find(n.get());
    int64_t i = it != global_index_.end() ? it->second : static_cast<int64_t>(globals_.size());
    if (it == global_index_.end()) {
      global_index_[n.get()] = i;
      globals_.push_back(n);
    }
    return ir::make(Op::DEFINE_GLOBAL, n->dtype, {}, {}, {i});
  }

  // A value to build: node n at the output index idx, read only where `valid` holds (PAD's mask).
  struct Request {
    NodeRef n;
    std::vector<NodeRef> idx;
    NodeRef valid;
    bool is_root = false;
  };
  using Key = std::vector<const void*>;  // a request's node, mask and index nodes
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h = 0;
      for (const void* p : k) h = h * 0x9e3779b97f4a7c15ull + std::hash<const void*>()(p);
      return h;
    }
  };
  static Key key(const Request& r) {
    Key k{r.n.get(), r.valid.get()};
    for (auto& i : r.idx) k.push_back(i.get());
    return k;
  }

  // A request being built: the requests it is made from, and what PAD and REDUCE add to them.
  struct Frame {
    Request req;
    Key key;
    size_t parent, slot;  // where its value goes: the parent frame's vals[slot] (none for the root)
    bool planned = false;
    std::vector<Request> needs = {};
    std::vector<NodeRef> vals = {};    // the values of `needs`, as they are built
    NodeRef cond = nullptr;            // PAD: where its source is read
    std::vector<NodeRef> ranges = {};  // REDUCE: its loops
  };
  static constexpr size_t kNoParent = SIZE_MAX;

  // Builds requests with an explicit stack (a graph of any depth), each once: sources in order,
  // depth first, so loop ids and globals are numbered as a recursive walk would.
  NodeRef render(const Request& root) {
    NodeRef result;
    std::vector<Frame> stack;
    stack.push_back({root, key(root), kNoParent, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      NodeRef v;
      if (!f.planned) {
        if (auto it = memo_.find(f.key); it != memo_.end()) {
          v = it->second;
        } else if ((v = plan(f))) {
          remember(f, v);
        } else {
          f.planned = true;
          f.vals.resize(f.needs.size());
          size_t fi = stack.size() - 1;  // `f` moves when the stack grows
          for (size_t k = stack[fi].needs.size(); k-- > 0;) {
            Request r = std::move(stack[fi].needs[k]);
            Key rk = key(r);
            stack.push_back({std::move(r), std::move(rk), fi, k});
          }
          continue;
        }
      } else {
        v = finish(f);
        remember(f, v);
      }
      (f.parent == kNoParent ? result : stack[f.parent].vals[f.slot]) = std::move(v);
      stack.pop_back();
    }
    return result;
  }

  void remember(const Frame& f, const NodeRef& v) {
    memo_[f.key] = v;
    keep_.push_back(f.req.n);  // memo keys are raw pointers: keep what they point at alive
    keep_.insert(keep_.end(), f.req.idx.begin(), f.req.idx.end());
    if (f.req.valid) keep_.push_back(f.req.valid);
  }

  // The value of a leaf request, or nullptr after filling f.needs (and f.cond, f.ranges).
  NodeRef plan(Frame& f) {
    const NodeRef& n = f.req.n;
    const std::vector<NodeRef>& idx = f.req.idx;
    const NodeRef& valid = f.req.valid;
    // another output of this kernel is computed again here, not read back (see build_schedule)
    bool output = std::any_of(outs_.begin(), outs_.end(), [&](const NodeRef& o) { return o == n; });
    // a load of buffer b at idx over the dims of `view` (b's node, or its symbolic view)
    auto load = [&](const NodeRef& b, const NodeRef& view) {
      std::vector<NodeRef> src{global_of(b), flat_index(idx, view)};
      if (valid) src.push_back(valid);
      return ir::make(Op::LOAD, n->dtype, {}, src);
    };
    if (!f.req.is_root && (is_realized(n) || (points_.count(n.get()) && !output && !inlined_.count(n.get()))))
      return load(n, n);
    // a buffer read through its symbolic view (Tensor::symbolic): indexed by the view's dims
    if (n->op == Op::RESHAPE && !n->sym.empty() && n->shape == n->src[0]->shape && n->src[0]->sym.empty() &&
        !f.req.is_root && is_realized(n->src[0]))
      return load(n->src[0], n);
    const ir::Shape& in = n->src.empty() ? n->shape : n->src[0]->shape;
    std::vector<NodeRef> sidx = idx;
    auto from_source = [&](NodeRef v) -> NodeRef {
      f.needs.push_back({n->src[0], std::move(sidx), std::move(v)});
      return nullptr;
    };
    switch (n->op) {
      case Op::CONST: return ir::make(Op::CONST, n->dtype, {}, {}, n->arg, n->fval);
      case Op::VAR: return n;  // a symbolic size as a value (a mean's count): the kernel's VAR
      case Op::IOTA: {
        NodeRef i = idx[n->arg[0]];
        return n->dtype == DType::I64 ? i : ir::make(Op::CAST, n->dtype, {}, {i});
      }
      case Op::RESHAPE: {
        if (!n->sym.empty() || !n->src[0]->sym.empty()) {  // over the dims' expressions
          if (n->shape == in) return from_source(valid);   // the same dims, another view of them
          sidx = reshape_index(n, idx);
          return from_source(valid);
        }
        NodeRef flat = flat_index(idx, n->shape);
        auto st = strides_of(in);
        sidx.assign(in.size(), nullptr);
        for (size_t j = 0; j < in.size(); j++) {
          NodeRef v = st[j] == 1 ? flat : ir::idiv(flat, st[j]);
          sidx[j] = in[j] == 1 ? ir::const_int(0) : j == 0 ? v : ir::mod(v, in[j]);
        }
        return from_source(valid);
      }
      case Op::PERMUTE:
        for (size_t i = 0; i < idx.size(); i++) sidx[n->arg[i]] = idx[i];
        return from_source(valid);
      case Op::EXPAND:
        for (size_t i = 0; i < idx.size(); i++)
          if (concrete_one(n->src[0], i)) sidx[i] = ir::const_int(0);
        return from_source(valid);
      case Op::SHRINK:
        for (size_t i = 0; i < idx.size(); i++)
          if (n->arg[2 * i]) sidx[i] = idx[i] + n->arg[2 * i];
        return from_source(valid);
      case Op::FLIP:
        for (size_t i = 0; i < idx.size(); i++)
          if (n->arg[i]) sidx[i] = idx[i] * -1 + dim_plus(n->src[0], i, -1);
        return from_source(valid);
      case Op::PAD:
        for (size_t i = 0; i < idx.size(); i++) {
          int64_t before = n->arg[2 * i], after = n->arg[2 * i + 1];
          if (!before && !after) continue;
          sidx[i] = idx[i] + (-before);
          if (before) f.cond = ir::land(f.cond, ir::ge(idx[i], before));
          if (after) f.cond = ir::land(f.cond, ir::alu(Op::CMPLT, idx[i], dim_plus(n->src[0], i, before)));
        }
        return from_source(ir::land(valid, f.cond));
      case Op::REDUCE:
        for (size_t a = 1; a < n->arg.size(); a++) {
          size_t ax = static_cast<size_t>(n->arg[a]);
          NodeRef r = n->src[0]->sym.empty() || !n->src[0]->sym[ax]
                          ? ir::range(next_range_++, in[ax], true)
                          : ir::symbolic_range(next_range_++, n->src[0]->sym[ax], ir::kReduceRange);
          sidx[n->arg[a]] = r;
          f.ranges.push_back(r);
        }
        return from_source(valid);
      case Op::CONTIGUOUS: return from_source(valid);
      case Op::BUFFER: break;
      default:
        if (ir::is_elementwise(n->op)) {
          for (auto& s : n->src) f.needs.push_back({s, idx, valid});
          return nullptr;
        }
    }
    throw Error(std::string("kiln.schedule: cannot build a kernel for ") + ir::op_name(n->op) + " " +
                n->str());
  }

  // The value of a planned request from the values of what it needs.
  static NodeRef finish(const Frame& f) {
    const NodeRef& n = f.req.n;
    const std::vector<NodeRef>& vals = f.vals;
    switch (n->op) {
      case Op::PAD:
        if (!f.cond) return vals[0];
        return ir::make(Op::WHERE, n->dtype, {}, {f.cond, vals[0], ir::const_float(0, n->dtype)});
      case Op::REDUCE: {
        std::vector<NodeRef> src{vals[0]};
        src.insert(src.end(), f.ranges.begin(), f.ranges.end());
        return ir::make(Op::REDUCE, n->dtype, {}, src, {n->arg[0]});
      }
      default:
        if (ir::is_elementwise(n->op)) return ir::make(n->op, n->dtype, {}, vals, n->arg);
        return vals[0];  // views and CONTIGUOUS: the source's value at the mapped index
    }
  }

  const std::unordered_set<const Node*>& points_;
  const std::unordered_set<const Node*>& inlined_;
  std::vector<NodeRef> outs_;
  std::vector<NodeRef> globals_;
  std::unordered_map<const Node*, int64_t> global_index_;
  std::unordered_map<Key, NodeRef, KeyHash> memo_;
  std::vector<NodeRef> keep_;
  int64_t next_range_ = 0;
};

}  // namespace

namespace {

// Realize points read by n's kernel (its inputs that are themselves computed in this schedule).
void point_inputs(const NodeRef& n, const std::unordered_set<const Node*>& points,
                  std::unordered_set<const Node*>& out) {
  std::unordered_set<const Node*> seen;
  std::vector<NodeRef> stack(n->src.begin(), n->src.end());
  while (!stack.empty()) {
    NodeRef x = stack.back();
    stack.pop_back();
    if (!seen.insert(x.get()).second || is_realized(x)) continue;
    if (points.count(x.get())) {
      out.insert(x.get());
      continue;
    }
    for (auto& s : x->src) stack.push_back(s);
  }
}

// Buffers already computed that n's kernel reads.
std::unordered_set<const Node*> realized_inputs(const NodeRef& n,
                                                const std::unordered_set<const Node*>& points) {
  std::unordered_set<const Node*> out, seen;
  std::vector<NodeRef> stack(n->src.begin(), n->src.end());
  while (!stack.empty()) {
    NodeRef x = stack.back();
    stack.pop_back();
    if (!seen.insert(x.get()).second || points.count(x.get())) continue;
    if (is_realized(x)) {
      out.insert(x.get());
      continue;
    }
    for (auto& s : x->src) stack.push_back(s);
  }
  return out;
}

// Whether every path from q's kernel down to point g keeps q's index: every node on it satisfies
// `keeps`. Walks at most `limit` nodes of the kernel (false past that).
template <class Keeps>
bool reads_only_along(const NodeRef& q, const NodeRef& g, const std::unordered_set<const Node*>& points,
                      const Keeps& keeps, size_t limit) {
  std::unordered_set<const Node*> seen[2];  // by whether the path so far keeps the index
  std::vector<std::pair<NodeRef, bool>> stack;
  for (auto& s : q->src) stack.push_back({s, true});
  size_t walked = 0;
  while (!stack.empty()) {
    auto [n, ok] = stack.back();
    stack.pop_back();
    if (n == g) {
      if (!ok) return false;
      continue;
    }
    if (is_realized(n) || points.count(n.get()) || !seen[ok].insert(n.get()).second) continue;
    if (++walked > limit) return false;
    ok = ok && keeps(n);
    for (auto& s : n->src) stack.push_back({s, ok});
  }
  return true;
}

// Whether q's kernel reads point g, one value per row, only at its own index: every path from q
// down to g runs through elementwise work, row reduces and row broadcasts (a variance reading its
// mean). A kernel computing both computes g once and uses it, as it does any of its outputs.
bool reads_in_place(const NodeRef& q, const NodeRef& g, const std::unordered_set<const Node*>& points) {
  if (g->shape.empty() || g->shape.back() != 1) return false;  // else a row reduce moves its index
  auto keeps = [](const NodeRef& n) { return ir::is_elementwise(n->op) || row_reduce(n) || row_expand(n); };
  return reads_only_along(q, g, points, keeps, SIZE_MAX);
}

// Whether q's kernel reads point g only at its own index and adds little work: every path from q
// down to g is elementwise work of q's shape, a few ops (a cast of a layer norm's gradient beside
// it; not a deep chain cut into points). A kernel computing both uses g's value where it computes it.
bool reads_at_own_index(const NodeRef& q, const NodeRef& g, const std::unordered_set<const Node*>& points) {
  if (g->shape != q->shape) return false;
  auto keeps = [&](const NodeRef& n) { return ir::is_elementwise(n->op) && n->shape == q->shape; };
  return reads_only_along(q, g, points, keeps, 32);
}

// Whether point k holds one value per row of q (q's shape with a last dim of 1).
bool row_statistic(const NodeRef& k, const NodeRef& q) {
  if (k->shape.size() != q->shape.size() || k->shape.empty() || k->shape.back() != 1) return false;
  return std::equal(k->shape.begin(), k->shape.end() - 1, q->shape.begin());
}

// Whether the kernel of `group` with q added can compute the row statistics `stats` that q reads
// (a layer norm's mean and rstd beside the values it normalizes) instead of reading them: each reads
// only what the kernel reads or computes, and q and each of them read each one in place. Computed
// once per row from the rows the kernel holds, they cost no memory traffic and save the kernel
// that would wait for them.
template <class Reads>
bool computed_per_row(const NodeRef& q, const std::vector<NodeRef>& group,
                      const std::unordered_set<const Node*>& stats, const std::vector<NodeRef>& points,
                      const Reads& reads, const std::unordered_set<const Node*>& point_set) {
  auto held = [&](const Node* l) {
    if (stats.count(l) || reads.at(q.get()).count(l)) return true;
    return std::any_of(group.begin(), group.end(),
                       [&](const NodeRef& g) { return g.get() == l || reads.at(g.get()).count(l); });
  };
  std::vector<NodeRef> readers(group.begin(), group.end());
  readers.push_back(q);
  for (auto& p : points)
    if (stats.count(p.get())) readers.push_back(p);
  for (auto& k : points) {
    if (!stats.count(k.get())) continue;
    for (const Node* l : reads.at(k.get()))
      if (!held(l)) return false;
    for (auto& r : readers)
      if (r != k && !reads_in_place(r, k, point_set)) return false;
  }
  return true;
}

}  // namespace

namespace {

Schedule build_schedule(const std::vector<NodeRef>& roots, const std::vector<NodeRef>& forced, bool explain) {
  std::unordered_map<const Node*, std::string> why;
  std::vector<NodeRef> points = realize_points(roots, forced, explain ? &why : nullptr);
  std::unordered_map<const Node*, size_t> topo;
  auto order = ir::toposort(roots, false);
  for (size_t i = 0; i < order.size(); i++) topo[order[i].get()] = i;
  std::sort(points.begin(), points.end(), [&](auto& a, auto& b) { return topo[a.get()] < topo[b.get()]; });
  std::unordered_set<const Node*> point_set;
  for (auto& p : points) point_set.insert(p.get());

  // transitive dependencies between realize points
  std::unordered_map<const Node*, std::unordered_set<const Node*>> deps;
  for (auto& p : points) {
    std::unordered_set<const Node*> direct, all;
    point_inputs(p, point_set, direct);
    for (auto* d : direct) {
      all.insert(d);
      all.insert(deps[d].begin(), deps[d].end());
    }
    deps[p.get()] = std::move(all);
  }

  // Multi-output kernels: points with one output shape that read a common buffer are computed by one
  // kernel (e.g. x.sum(1) and x.max(1) read x once). A point may join one it depends on when that
  // one is elementwise and small: the kernel computes it again where the later one reads it (an
  // optimizer's moments and the parameter that reads them: one pass over each buffer), or when it
  // reads that one only at its own index (a row's mean and the variance around it: one pass).
  std::unordered_map<const Node*, std::unordered_set<const Node*>> reads;  // realized inputs, points
  for (auto& p : points) {
    reads[p.get()] = realized_inputs(p, point_set);
    point_inputs(p, point_set, reads[p.get()]);
  }
  std::unordered_map<const Node*, bool> small_elementwise;
  auto recomputable = [&](const NodeRef& p) {
    auto [it, fresh] = small_elementwise.try_emplace(p.get(), false);
    if (fresh && p->op != Op::CONTIGUOUS && p->op != Op::REDUCE) {
      std::unordered_set<const Node*> seen;
      bool ok = true;
      for (std::vector<NodeRef> stack(p->src.begin(), p->src.end()); ok && !stack.empty();) {
        NodeRef x = stack.back();
        stack.pop_back();
        if (is_realized(x) || point_set.count(x.get()) || !seen.insert(x.get()).second) continue;
        ok = x->op != Op::REDUCE && x->op != Op::ATTENTION && x->op != Op::LAYER_NORM && seen.size() <= 48;
        for (auto& y : x->src) stack.push_back(y);
      }
      it->second = ok;
    }
    return it->second;
  };
  // Whether q, a later point, can be computed by the kernel of `group` (row statistics of q's rows):
  // q reads each of them at its own row, they read nothing q does not, and q needs nothing computed
  // between them and it.
  auto takes_its_reader = [&](const NodeRef& q, const std::vector<NodeRef>& group, size_t i, size_t j,
                              const std::vector<bool>& taken, std::vector<size_t>& early) {
    std::unordered_set<const Node*> stats;
    for (auto& g : group) {
      if (!row_statistic(g, q) || !deps[q.get()].count(g.get())) return false;
      stats.insert(g.get());
    }
    // the kernel runs where the first of group is: what q needs from between runs before it
    early.clear();
    for (size_t k = i + 1; k < j; k++) {
      if (taken[k] || !deps[q.get()].count(points[k].get())) continue;
      for (auto& g : group)
        if (deps[points[k].get()].count(g.get())) return false;
      early.push_back(k);
    }
    return computed_per_row(q, {}, stats, points, reads, point_set);
  };
  // A point the GEMM library computes (forced, with a reduce of its own) stays the only output of
  // its kernel, which the library runs, but for a gelu of it that the library writes beside it.
  std::unordered_set<const Node*> forced_set;
  for (auto& f : forced) forced_set.insert(f.get());
  auto library_result = [&](const NodeRef& g) {
    if (!forced_set.count(g.get())) return false;
    std::unordered_set<const Node*> seen;
    std::vector<NodeRef> stack{g};
    while (!stack.empty()) {
      NodeRef n = std::move(stack.back());
      stack.pop_back();
      if (n->op == Op::REDUCE) return true;
      if (is_realized(n) || (n != g && point_set.count(n.get())) || !seen.insert(n.get()).second) continue;
      for (auto& x : n->src) stack.push_back(x);
    }
    return false;
  };
  Schedule s;
  std::vector<std::vector<NodeRef>> groups;
  std::vector<std::unordered_set<const Node*>> inlines;  // per group (see the Builder)
  std::vector<bool> taken(points.size());
  for (size_t i = 0; i < points.size(); i++) {
    if (taken[i]) continue;
    const NodeRef& p = points[i];
    if (p->numel() == 0) {
      s.empty.push_back(p);
      continue;
    }
    if (p->op == Op::INDEX_COPY) {  // a kernel of its own, over the slices it writes
      if (!is_realized(p->src[0]))
        throw Error(
            "kiln.schedule: INDEX_COPY into an unrealized destination (its composite should "
            "have replaced it): " +
            p->str());
      groups.push_back({p});
      inlines.emplace_back();
      continue;
    }
    if (p->op == Op::ATTENTION || p->op == Op::LAYER_NORM) {
      // a special node's kernel computes nothing else, but the parts of one pass over the same
      // sources come out together (attention's output and log-sum-exp; a layer norm's parts)
      auto partners = p->op == Op::ATTENTION ? attention_partners : layer_norm_partners;
      std::vector<NodeRef> group{p};
      for (size_t j = i + 1; j < points.size(); j++) {
        const NodeRef& q = points[j];
        if (taken[j] || !partners(*p, *q)) continue;
        bool independent = true;  // nothing between the two that the later one needs
        for (size_t k = i + 1; k < j && independent; k++)
          if (!taken[k]) independent &= !deps[q.get()].count(points[k].get());
        if (!independent) continue;
        group.push_back(q);
        taken[j] = true;
      }
      if (p->op == Op::ATTENTION && group.size() > 1 && ir::attention_part(p->arg) != ir::AttentionPart::Out)
        std::swap(group[0], group[1]);  // the output first
      groups.push_back(std::move(group));
      inlines.emplace_back();
      continue;
    }
    if (library_result(p)) {
      size_t j = i + 1;
      for (; j < points.size(); j++) {
        const NodeRef& q = points[j];
        const auto& in = reads[q.get()];
        if (!taken[j] && q->shape == p->shape && in.size() == 1 && in.count(p.get()) &&
            library_gelu_aux(p, q, reads[p.get()]))
          break;
      }
      if (j < points.size()) {
        if (explain) why[points[j].get()] += "; the GEMM library computes it beside the matmul's result";
        groups.push_back({p, points[j]});
        inlines.emplace_back();
        taken[j] = true;
        continue;
      }
    }
    std::vector<NodeRef> group{p};
    std::unordered_set<const Node*> inlined;  // row statistics this kernel computes, not reads
    std::vector<size_t> early;                // points moved ahead of this kernel
    const auto& shared = reads[p.get()];
    for (size_t j = i + 1; j < points.size(); j++) {
      const NodeRef& q = points[j];
      if (taken[j] || q->numel() == 0 || q->op == Op::ATTENTION || q->op == Op::LAYER_NORM ||
          q->op == Op::INDEX_COPY)
        continue;
      if (q->shape != p->shape) {
        // a kernel of row statistics takes in a later point that reads them at its rows (a loss's
        // max and sum of exponentials, and its gradient over the whole row): the rows are read once
        if (inlined.empty() && takes_its_reader(q, group, i, j, taken, early)) {
          for (size_t k : early) {  // kernels of their own, before this one
            groups.push_back({points[k]});
            inlines.emplace_back();
            taken[k] = true;
          }
          if (explain) why[q.get()] += "; computes the statistics of its rows and stores them too";
          group.insert(group.begin(), q);  // the kernel's loops are the rows'
          taken[j] = true;
          break;
        }
        continue;
      }
      bool independent = true, common = false;
      for (auto& g : group) {
        bool uses = deps[q.get()].count(g.get()) > 0;
        independent &=
            !deps[g.get()].count(q.get()) && (!uses || recomputable(g) || reads_in_place(q, g, point_set) ||
                                              (!library_result(g) && reads_at_own_index(q, g, point_set)));
        common |= uses;
      }
      for (auto* in : reads[q.get()]) common |= shared.count(in) > 0;
      // a later point that depends on nothing in between can join; others keep their order, unless
      // all it needs in between are statistics of its rows computed from what the kernel reads
      std::unordered_set<const Node*> stats = inlined;
      for (size_t k = i + 1; k < j && independent; k++)
        if (!taken[k] && deps[q.get()].count(points[k].get())) {
          independent = row_statistic(points[k], q);
          stats.insert(points[k].get());
        }
      if (independent && !stats.empty())
        independent = computed_per_row(q, group, stats, points, reads, point_set);
      if (independent && common) {
        group.push_back(q);
        if (explain && !stats.empty()) why[q.get()] += "; computes the statistics of its rows itself";
        inlined = std::move(stats);
        taken[j] = true;
      }
    }
    groups.push_back(std::move(group));
    inlines.push_back(std::move(inlined));
  }
  for (size_t gi = 0; gi < groups.size(); gi++) {
    const std::vector<NodeRef>& g = groups[gi];
    Kernel k;
    if (g[0]->op == Op::ATTENTION) {
      auto stop = [&](const NodeRef& n) { return is_realized(n) || point_set.count(n.get()) > 0; };
      k.ast = attention_ast(g, stop, k.inputs);
      k.outputs = g;
    } else if (g[0]->op == Op::LAYER_NORM) {
      k.ast = layer_norm_ast(g);
      k.outputs = g;
      k.inputs = g[0]->src;
    } else if (g[0]->op == Op::INDEX_COPY) {
      Builder b(point_set, g, inlines[gi]);
      k.ast = b.build_index_copy();
      k.outputs = g;
      k.inputs = b.inputs();
      k.in_place = g[0]->src[0];
    } else {
      Builder b(point_set, g, inlines[gi]);
      k.ast = b.build();
      k.outputs = g;
      k.inputs = b.inputs();
    }
    if (explain)
      for (size_t o = 0; o < g.size(); o++)
        k.why.push_back(why[g[o].get()] +
                        (o ? "; joins this kernel: it reads a buffer they read or what they compute" : ""));
    s.kernels.push_back(std::move(k));
  }
  return s;
}

}  // namespace

Schedule make_schedule(const std::vector<NodeRef>& roots, const ScheduleOptions& options) {
  if (!options.library_gemm) return build_schedule(roots, {}, options.explain);
  std::vector<NodeRef> forced = library_gemm_plan(roots);
  Schedule s = build_schedule(roots, forced, options.explain);
  // a matmul whose consumers the plan left fused (a bias, in case it is more than the library
  // takes) and that still does not match: realized the next round (each round realizes what it
  // adds, so it never adds it again)
  for (int round = 0; round < 2; round++) {
    std::vector<NodeRef> more = library_gemm_points(s);
    if (more.empty()) break;
    forced.insert(forced.end(), more.begin(), more.end());
    s = build_schedule(roots, forced, options.explain);
  }
  return s;
}

}  // namespace kiln::schedule
