// Linearize: kernel AST -> linear program (see linearize.h).
#include "codegen/linearize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"
#include "ir/symbolic.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

class Linearizer {
 public:
  explicit Linearizer(const NodeRef& ast) : order_(ir::toposort({ast})) {
    for (auto& n : order_) {  // which RANGE ids each node depends on
      std::set<int64_t> d;
      if (n->op == Op::RANGE) d.insert(n->arg[0]);
      for (auto& s : n->src) d.insert(deps_[s.get()].begin(), deps_[s.get()].end());
      deps_[n.get()] = std::move(d);
    }
  }

  Program run(const NodeRef& ast) {
    std::vector<NodeRef> globals, segments;
    // lanes that are loops of a sum (DOT: a vector of partial sums) are opened by that sum only
    std::set<const Node*> sum_lanes;
    for (auto& n : order_)
      if (n->op == Op::REDUCE)
        for (size_t i = 1; i < n->src.size(); i++)
          if (n->src[i]->arg[2] == ir::kUpcastRange) sum_lanes.insert(n->src[i].get());
    for (auto& n : order_) {
      if (n->op == Op::DEFINE_GLOBAL) {
        size_t i = static_cast<size_t>(n->arg[0]);
        if (p_.globals.size() <= i) p_.globals.resize(i + 1), p_.written.resize(i + 1);
        p_.globals[i] = n->dtype;
      }
      if (n->op == Op::STORE) p_.written[static_cast<size_t>(n->src[0]->arg[0])] = true;
      if (n->op == Op::RANGE && n->arg[2] == ir::kGlobalRange) globals.push_back(n);
      if (n->op == Op::RANGE && n->arg[2] == ir::kUpcastRange && !sum_lanes.count(n.get()))
        lanes_.push_back(n);
      if (n->op == Op::RANGE && n->arg[2] == ir::kSegmentRange) segments.push_back(n);
    }
    std::sort(lanes_.begin(), lanes_.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
    std::sort(globals.begin(), globals.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
    // a scratch's fill (PACK) is made inside the output loops it moves with, a prefix of them
    std::vector<std::pair<size_t, NodeRef>> packs;
    for (auto& st : ast->src) {
      if (!fills_scratch(st)) {
        outputs_.push_back(st);
        continue;
      }
      size_t p = 0;
      while (p < globals.size() && deps_[st.get()].count(globals[p]->arg[0])) p++;
      for (size_t j = p; j < globals.size(); j++)
        if (deps_[st.get()].count(globals[j]->arg[0]))
          throw Error("kiln.linearize: a scratch fill moves with output loops that are not the outermost");
      packs.push_back({p, st});
    }
    for (auto& n : order_)
      if (n->op == Op::DEFINE_GLOBAL) emit(n);
    // symbolic sizes: read from the argument after the buffers, one I64 a VAR (ir::vars_of's order)
    vars_ = ir::vars_of(ast);
    if (!vars_.empty()) {
      vars_global_ = ast->arg.empty() ? static_cast<int64_t>(p_.globals.size()) : ast->arg[0];
      p_.globals.resize(static_cast<size_t>(vars_global_) + 1, DType::I64);
      p_.written.resize(p_.globals.size(), false);
      p_.globals.back() = DType::I64;
    }
    if (!segments.empty()) return emit_segments(segments, !globals.empty() || !packs.empty());
    double trips = 1;
    for (size_t i = 0; i < globals.size(); i++) {
      const NodeRef& g = globals[i];
      trips_ = trips;
      for (auto& [p, st] : packs)
        if (p == i) emit_fill(st);
      // what the inner output loops do not move is computed before they open: a row's reduces in a
      // kernel that broadcasts them back over the row run once per row (see fusion's row_reduce)
      if (i > 0 && lanes_.empty()) {
        std::set<int64_t> inner;
        for (size_t j = i; j < globals.size(); j++) inner.insert(globals[j]->arg[0]);
        for (auto& st : outputs_) hoist(st, inner);
      }
      memo_[g.get()] = add({Op::RANGE, DType::I64, extent(g), {g->arg[0], g->arg[1], 0, i == 0}});
      if (i == 0) p_.outer_size = g->arg[1];
      trips *= static_cast<double>(g->arg[1]);
    }
    trips_ = trips;
    for (auto& [p, st] : packs)  // moves with every output loop left (the others became lanes)
      if (p == globals.size()) emit_fill(st);
    if (!lanes_.empty()) {
      // reduces first, each with its lanes inside its loops; then the stores, over the lanes
      for (auto& n : order_)
        if (n->op == Op::REDUCE && !inside_another_reduce(n)) emit(n);
      open_lanes(outputs_, lanes_);
      for (auto& st : outputs_) emit(st);
      close_lanes(lanes_);
    } else {
      for (auto& st : outputs_) emit(st);
    }
    for (size_t i = 0; i < globals.size(); i++) add({Op::ENDRANGE, DType::I64, {}, {}});
    return std::move(p_);
  }

 private:
  int add(Inst in) {
    if (ir::is_elementwise(in.op)) p_.flops += trips_;
    p_.insts.push_back(std::move(in));
    return static_cast<int>(p_.insts.size()) - 1;
  }

  // A horizontally fused kernel: each segment's loop (arg {id, size, kind, outer, 0, offset}) with
  // its stores, one after another; nothing computed in one segment is reused in the next.
  Program emit_segments(std::vector<NodeRef>& segments, bool other_loops) {
    if (other_loops || !lanes_.empty())
      throw Error("kiln.linearize: a kernel of segments has loops or scratch fills outside them");
    std::sort(segments.begin(), segments.end(), [](auto& a, auto& b) { return a->arg[3] < b->arg[3]; });
    for (auto& seg : segments) {
      scopes_.emplace_back();
      memo_[seg.get()] =
          add({Op::RANGE, DType::I64, {}, {seg->arg[0], seg->arg[1], ir::kSegmentRange, 1, 0, seg->arg[3]}});
      scopes_.back().push_back(seg.get());
      trips_ = static_cast<double>(seg->arg[1]);
      for (auto& st : outputs_)
        if (deps_[st.get()].count(seg->arg[0])) emit(st);
      add({Op::ENDRANGE, DType::I64, {}, {}});
      for (auto* n : scopes_.back()) memo_.erase(n);
      scopes_.pop_back();
      p_.outer_size = std::max(p_.outer_size, seg->arg[3] + seg->arg[1]);
    }
    for (auto& st : outputs_)
      if (deps_[st.get()].size() != 1)
        throw Error("kiln.linearize: a store of a kernel of segments moves with other than one segment");
    return std::move(p_);
  }

  // A symbolic range's trip count, emitted before its loop opens: {its instruction}, or {}.
  std::vector<int> extent(const NodeRef& r) {
    if (!ir::is_symbolic_range(*r)) return {};
    return {emit(r->src[0])};
  }

  // Whether a store fills a kernel's scratch (under loops of kind kPackRange) rather than an output.
  bool fills_scratch(const NodeRef& st) {
    return std::any_of(order_.begin(), order_.end(), [&](const NodeRef& n) {
      return n->op == Op::RANGE && n->arg[2] == ir::kPackRange && deps_[st.get()].count(n->arg[0]);
    });
  }

  // Emits a scratch fill in its own loop nest (its loops in id order), before the loops that read it.
  void emit_fill(const NodeRef& st) {
    std::vector<NodeRef> loops;
    for (auto& n : order_)
      if (n->op == Op::RANGE && n->arg[2] == ir::kPackRange && deps_[st.get()].count(n->arg[0]))
        loops.push_back(n);
    std::sort(loops.begin(), loops.end(), [](auto& a, auto& b) { return a->arg[0] < b->arg[0]; });
    double outer_trips = trips_;
    scopes_.emplace_back();
    for (auto& r : loops) {
      memo_[r.get()] = add({Op::RANGE, DType::I64, {}, {r->arg[0], r->arg[1], ir::kPackRange, 0, 0}});
      scopes_.back().push_back(r.get());
      trips_ *= static_cast<double>(r->arg[1]);
    }
    emit(st);
    for (size_t i = 0; i < loops.size(); i++) add({Op::ENDRANGE, DType::I64, {}, {}});
    for (auto* n : scopes_.back()) memo_.erase(n);
    scopes_.pop_back();
    trips_ = outer_trips;
  }

  // Opens the lane loops (outer lane first); before each, computes what the inner lanes do not move.
  // `summed`: lanes whose values are added into one accumulator (not a vector loop).
  void open_lanes(const std::vector<NodeRef>& roots, const std::vector<NodeRef>& lanes,
                  const std::set<const Node*>& summed = {}) {
    scopes_.emplace_back();
    for (size_t i = 0; i < lanes.size(); i++) {
      std::set<int64_t> inner;
      for (size_t j = i; j < lanes.size(); j++) inner.insert(lanes[j]->arg[0]);
      for (auto& r : roots) hoist(r, inner);
      const NodeRef& l = lanes[i];
      int64_t serial = summed.count(l.get()) ? 1 : 0;
      memo_[l.get()] = add({Op::RANGE, DType::I64, {}, {l->arg[0], l->arg[1], ir::kUpcastRange, 0, serial}});
      scopes_.back().push_back(l.get());
      trips_ *= static_cast<double>(l->arg[1]);
    }
  }
  void close_lanes(const std::vector<NodeRef>& lanes) {
    for (auto& l : lanes) {
      add({Op::ENDRANGE, DType::I64, {}, {}});
      trips_ /= static_cast<double>(l->arg[1]);
    }
    for (auto* n : scopes_.back()) memo_.erase(n);
    scopes_.pop_back();
  }

  // Emits n after its sources (in order), each once: a post-order walk with an explicit stack, as a
  // kernel's expression may be deep. A REDUCE is emitted with its group (which emits its body).
  int emit(const NodeRef& root) {
    struct Frame {
      NodeRef n;
      size_t next = 0;            // the source to emit next
      std::vector<int> src = {};  // the sources' instructions so far
    };
    std::vector<Frame> stack{{root}};
    int last = -1;  // the instruction of the frame just finished
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next > 0) f.src.push_back(last);  // back from the source before
      const NodeRef& n = f.n;
      if (f.next == 0) {
        if (auto it = memo_.find(n.get()); it != memo_.end()) {
          last = it->second;
          stack.pop_back();
          continue;
        }
        if (n->op == Op::REDUCE) {
          emit_reduce_group(n);
          last = memo_.at(n.get());
          stack.pop_back();
          continue;
        }
        if (n->op == Op::RANGE) throw Error("kiln.linearize: range used outside its loop: " + n->str());
      }
      if (f.next < n->src.size()) {
        NodeRef s = n->src[f.next++];
        stack.push_back({std::move(s)});
        continue;
      }
      if (n->op == Op::VAR) {  // {the argument, the slot}
        auto slot = std::find(vars_.begin(), vars_.end(), n) - vars_.begin();
        last = add({Op::VAR, DType::I64, {}, {vars_global_, slot}});
      } else {
        last = add({n->op, n->dtype, std::move(f.src), n->arg, n->fval});
      }
      memo_[n.get()] = last;
      if (!scopes_.empty()) scopes_.back().push_back(n.get());
      stack.pop_back();
    }
    return last;
  }

  // Emits every not-yet-emitted REDUCE over the same ranges as `first` in one loop nest; only those
  // that move with no range `first` does not, since `first` may be emitted before the others' loops
  // open (hoisted out of an output loop it does not move with).
  void emit_reduce_group(const NodeRef& first) {
    std::vector<NodeRef> ranges(first->src.begin() + 1, first->src.end());
    // lanes among its loops (DOT): a vector of partial sums, innermost, added up after the loops
    std::vector<NodeRef> own_lanes;
    for (auto& r : ranges)
      if (r->arg[2] == ir::kUpcastRange) own_lanes.push_back(r);
    std::erase_if(ranges, [](const NodeRef& r) { return r->arg[2] == ir::kUpcastRange; });
    // over an empty range a reduce is its identity and none of its body runs: none is emitted (a
    // load hoisted out of the loop would read an empty buffer)
    if (std::any_of(ranges.begin(), ranges.end(), [](const NodeRef& r) { return r->arg[1] == 0; })) {
      memo_[first.get()] = add(identity(static_cast<Op>(first->arg[0]), first->dtype));
      if (!scopes_.empty()) scopes_.back().push_back(first.get());
      return;
    }
    std::set<int64_t> rids;
    for (auto& r : ranges) rids.insert(r->arg[0]);
    // with lanes, the reduces that move with them keep one accumulator per lane and accumulate in
    // the lane loop; one that does not move with them shares no loop with those (it would be read
    // by lane, or added once per lane)
    auto laned = [&](const NodeRef& red) {
      return std::any_of(lanes_.begin(), lanes_.end(),
                         [&](auto& l) { return deps_[red.get()].count(l->arg[0]) > 0; });
    };
    const bool out_lanes = laned(first), lanes = out_lanes || !own_lanes.empty();
    std::vector<NodeRef> inner = out_lanes ? lanes_ : std::vector<NodeRef>{};
    inner.insert(inner.end(), own_lanes.begin(), own_lanes.end());
    std::vector<NodeRef> group;
    for (auto& n : order_)
      if (n->op == Op::REDUCE && !memo_.count(n.get()) &&
          std::vector<NodeRef>(n->src.begin() + 1, n->src.end()) ==
              std::vector<NodeRef>(first->src.begin() + 1, first->src.end()) &&
          std::includes(deps_[first.get()].begin(), deps_[first.get()].end(), deps_[n.get()].begin(),
                        deps_[n.get()].end()) &&
          laned(n) == out_lanes)
        group.push_back(n);
    std::set<int64_t> outside = rids;
    for (auto& l : inner) outside.insert(l->arg[0]);
    // hoist: values inside the reduce that do not depend on its ranges are computed before the loop
    for (auto& red : group) hoist(red->src[0], outside);
    std::vector<int> accs;
    for (auto& red : group) {
      int ident = add(identity(static_cast<Op>(red->arg[0]), red->dtype));
      accs.push_back(add({Op::DEFINE_ACC, red->dtype, {ident}, acc_arg(red, inner)}));
    }
    double outer_trips = trips_;
    scopes_.emplace_back();
    for (auto& r : ranges) {
      bool innermost = r == ranges.back() && !lanes;
      int64_t contiguous = innermost && unit_stride_loads(group, r) ? 1 : 0;
      memo_[r.get()] = add({Op::RANGE, DType::I64, extent(r), {r->arg[0], r->arg[1], 1, 0, contiguous}});
      scopes_.back().push_back(r.get());
      trips_ *= static_cast<double>(r->arg[1]);
    }
    if (lanes) {  // what only the reduce ranges move is loaded once for all lanes
      std::vector<NodeRef> srcs;
      for (auto& red : group) srcs.push_back(red->src[0]);
      // sums nested in these that move with their loops (chunked sums) open their own lane loops,
      // so they run before ours
      for (auto& n : ir::toposort(srcs))
        if (n->op == Op::REDUCE && !memo_.count(n.get()) &&
            std::any_of(rids.begin(), rids.end(), [&](int64_t id) { return deps_[n.get()].count(id) > 0; }))
          emit(n);
      open_lanes(srcs, inner);
    }
    for (size_t i = 0; i < group.size(); i++) {
      int v = emit(group[i]->src[0]);
      add({static_cast<Op>(group[i]->arg[0]), group[i]->dtype, {accs[i], v}, {1}});
    }
    if (lanes) close_lanes(inner);
    for (size_t i = 0; i < ranges.size(); i++) add({Op::ENDRANGE, DType::I64, {}, {}});
    for (auto* n : scopes_.back()) memo_.erase(n);
    scopes_.pop_back();
    trips_ = outer_trips;
    if (!own_lanes.empty()) {  // each sum's lanes added up into an accumulator of the output lanes
      std::vector<NodeRef> outs = out_lanes ? lanes_ : std::vector<NodeRef>{};
      std::set<const Node*> summed;
      for (auto& l : own_lanes) summed.insert(l.get());
      for (auto& acc : accs) {
        const Inst partial = p_.insts[static_cast<size_t>(acc)];
        int ident = add(identity(static_cast<Op>(partial.arg[0]), partial.dtype));
        NodeRef red = group[static_cast<size_t>(&acc - accs.data())];
        int total = add({Op::DEFINE_ACC, partial.dtype, {ident}, acc_arg(red, outs)});
        open_lanes({}, inner, summed);
        add({static_cast<Op>(partial.arg[0]), partial.dtype, {total, acc}, {1}});
        close_lanes(inner);
        acc = total;
      }
    }
    for (size_t i = 0; i < group.size(); i++) {
      memo_[group[i].get()] = accs[i];
      if (!scopes_.empty()) scopes_.back().push_back(group[i].get());
    }
  }

  // A DEFINE_ACC's arg for reduce red with an accumulator per lane of `lanes`: {op, lane count,
  // (lane range id, lane size)...}, or {op} without lanes.
  static std::vector<int64_t> acc_arg(const NodeRef& red, const std::vector<NodeRef>& lanes) {
    std::vector<int64_t> arg{red->arg[0]};
    if (lanes.empty()) return arg;
    int64_t total = 1;
    for (auto& l : lanes) total *= l->arg[1];
    arg.push_back(total);
    for (auto& l : lanes) arg.insert(arg.end(), {l->arg[0], l->arg[1]});
    return arg;
  }

  // Whether every load in the reduces that moves with range r moves by one element per step: then
  // vectorizing the reduce loop reads memory contiguously (else, e.g. for matmul's second operand,
  // leaving the loop to the compiler lets it vectorize the outer loop instead).
  static bool unit_stride_loads(const std::vector<NodeRef>& group, const NodeRef& r) {
    std::vector<NodeRef> roots;
    for (auto& red : group) roots.push_back(red->src[0]);
    return unit_stride(roots, r, Op::LOAD);
  }

  // Whether a reduce moves with a reduce loop not its own: it is computed inside that loop. The loops
  // of the reduces under it (a chunked sum's sum within a chunk) close inside it and do not count.
  bool inside_another_reduce(const NodeRef& red) {
    std::set<int64_t> closed;
    for (auto& n : ir::toposort({red}))
      if (n->op == Op::REDUCE)
        for (size_t i = 1; i < n->src.size(); i++) closed.insert(n->src[i]->arg[0]);
    for (auto& n : order_)
      if (n->op == Op::RANGE && n->arg[2] == ir::kReduceRange && !closed.count(n->arg[0]) &&
          deps_[red.get()].count(n->arg[0]))
        return true;
    return false;
  }

  // Emits, before loops over `rids` open, what under n does not move with them.
  void hoist(const NodeRef& n, const std::set<int64_t>& rids) {
    std::unordered_set<const Node*> seen;  // a DAG: each shared node is looked at once
    hoist(n, rids, seen);
  }
  void hoist(const NodeRef& root, const std::set<int64_t>& rids, std::unordered_set<const Node*>& seen) {
    std::vector<NodeRef> stack{root};  // depth first, sources in order
    while (!stack.empty()) {
      NodeRef n = std::move(stack.back());
      stack.pop_back();
      if (memo_.count(n.get()) || n->op == Op::RANGE || !seen.insert(n.get()).second) continue;
      const auto& d = deps_[n.get()];
      bool invariant = std::none_of(d.begin(), d.end(), [&](int64_t id) { return rids.count(id); });
      bool trivial = n->op == Op::CONST || n->op == Op::DEFINE_GLOBAL;
      if (invariant && !trivial) {
        emit(n);
        continue;
      }
      if (n->op == Op::REDUCE) continue;  // a reduce nested here has its own ranges
      for (auto it = n->src.rbegin(); it != n->src.rend(); ++it) stack.push_back(*it);
    }
  }

  static Inst identity(Op op, DType t) {
    double v = op == Op::ADD ? 0 : op == Op::MUL ? 1 : -INFINITY;
    if (!is_float(t) && op == Op::MAX) {
      // the dtype's minimum: INT64_MIN shifted down to the dtype's width (negating 2^63 overflows)
      int64_t lo = t == DType::Bool || is_unsigned(t)
                       ? 0
                       : std::numeric_limits<int64_t>::min() >> (64 - dtype_size(t) * 8);
      return {Op::CONST, t, {}, {lo}};
    }
    if (is_float(t)) return {Op::CONST, t, {}, {}, v};
    return {Op::CONST, t, {}, {static_cast<int64_t>(v)}};
  }

  std::vector<NodeRef> order_;
  std::vector<NodeRef> vars_;  // the VARs, in their slots' order
  int64_t vars_global_ = -1;
  std::unordered_map<const Node*, std::set<int64_t>> deps_;
  std::unordered_map<const Node*, int> memo_;
  std::vector<std::vector<const Node*>> scopes_;
  Program p_;
  double trips_ = 1;
  std::vector<NodeRef> lanes_;    // the upcast ranges, outer first
  std::vector<NodeRef> outputs_;  // the stores to outputs (not to a scratch)
};

}  // namespace

Program linearize(const NodeRef& ast) { return Linearizer(ast).run(ast); }

}  // namespace kiln::codegen
