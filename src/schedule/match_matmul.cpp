// Matmul recognition on kernel ASTs (see match_matmul.h).
#include "schedule/match_matmul.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ir/graph_rewrite.h"
#include "ir/symbolic.h"
#include "kiln/device.h"

namespace kiln::schedule {

using ir::NodeRef;
using ir::Op;

namespace {

bool gemm_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Drops float casts that widen to f32 or round to `keep` (the output dtype): casts a GEMM with f32
// accumulation does implicitly, or more precisely.
NodeRef strip_casts(NodeRef v, DType keep) {
  while (v->op == Op::CAST && (v->dtype == DType::F32 || v->dtype == keep) && gemm_float(v->src[0]->dtype))
    v = v->src[0];
  return v;
}

// An index expression as offset + sum(coef * range): nullopt for anything else (div, mod, masks).
struct Linear {
  std::map<int64_t, int64_t> coef;  // range id -> coefficient
  int64_t offset = 0;
  int64_t at(int64_t range) const {
    auto it = coef.find(range);
    return it == coef.end() ? 0 : it->second;
  }
};

// The value of a loop-free index expression (constants, and VARs at their values in b), else nullopt.
std::optional<int64_t> value_of(const NodeRef& e, const ir::Bindings& b) {
  switch (e->op) {
    case Op::CONST: return e->ival();
    case Op::VAR: {
      auto it = b.find(e.get());
      return it == b.end() ? std::nullopt : std::optional<int64_t>(it->second);
    }
    case Op::ADD:
    case Op::MUL: {
      auto x = value_of(e->src[0], b), y = value_of(e->src[1], b);
      if (!x || !y) return std::nullopt;
      return e->op == Op::ADD ? *x + *y : *x * *y;
    }
    default: return std::nullopt;
  }
}

bool linear_into(const NodeRef& e, int64_t scale, Linear& out, std::map<int64_t, NodeRef>& ranges,
                 const ir::Bindings& b) {
  if (auto v = value_of(e, b)) {
    out.offset += scale * *v;
    return true;
  }
  switch (e->op) {
    case Op::RANGE:
      out.coef[e->ival()] += scale;
      ranges[e->ival()] = e;
      return true;
    case Op::ADD:
      return linear_into(e->src[0], scale, out, ranges, b) && linear_into(e->src[1], scale, out, ranges, b);
    case Op::MUL:
      if (auto v = value_of(e->src[1], b)) return linear_into(e->src[0], scale * *v, out, ranges, b);
      if (auto v = value_of(e->src[0], b)) return linear_into(e->src[1], scale * *v, out, ranges, b);
      return false;
    default: return false;
  }
}

std::optional<Linear> linear(const NodeRef& e, std::map<int64_t, NodeRef>& ranges, const ir::Bindings& b) {
  Linear l;
  if (!linear_into(e, 1, l, ranges, b)) return std::nullopt;
  std::erase_if(l.coef, [](const auto& kv) { return kv.second == 0; });
  for (auto& [r, coef] : l.coef)
    if (coef < 0) return std::nullopt;  // flipped views: GEMM libraries take no negative strides
  return l;
}

// A kernel-level expression matched node by node against a kernel's epilogue: built from the
// frontend's graph over stand-in f32 buffers, whose LOADs stand for the values the epilogue takes.
struct Template {
  NodeRef expr;
  std::vector<NodeRef> inputs;  // the LOAD of each stand-in buffer, in the order they were given
};

// The one kernel computing `root` over the stand-in buffers `args` (ids below zero, never a real
// buffer's): its stored value and the LOAD of each buffer.
Template template_of(const NodeRef& root, const std::vector<NodeRef>& args) {
  Schedule s = make_schedule(ir::rewrite_graph({root}));
  const Kernel& k = s.kernels.at(0);
  Template t{k.ast->src.at(0)->src[2], std::vector<NodeRef>(args.size())};
  for (auto& n : ir::toposort({t.expr}))
    if (n->op == Op::LOAD) {
      const NodeRef& buffer = k.inputs.at(static_cast<size_t>(n->src[0]->ival()) - 1);
      for (size_t i = 0; i < args.size(); i++)
        if (buffer == args[i]) t.inputs[i] = n;
    }
  return t;
}

NodeRef stand_in(int64_t id) { return ir::make(Op::BUFFER, DType::F32, {2}, {}, {id, Device::cpu().code()}); }

std::atomic<GeluGraph> gelu_graph{nullptr};
std::atomic<GeluGradGraph> gelu_grad_graph{nullptr};

// nullptr until the frontend registers gelu's graph
const Template* gelu_template() {
  GeluGraph build = gelu_graph.load();
  if (!build) return nullptr;
  static const Template t = [build] {
    NodeRef x = stand_in(-1);
    return template_of(build(x), {x});
  }();
  return &t;
}

// nullptr until the frontend registers the graph of gelu's gradient
const Template* gelu_grad_template() {
  GeluGradGraph build = gelu_grad_graph.load();
  if (!build) return nullptr;
  static const Template t = [build] {
    NodeRef x = stand_in(-1), dy = stand_in(-2);
    return template_of(build(x, dy), {x, dy});
  }();
  return &t;
}

using Visited = std::set<std::pair<const ir::Node*, const ir::Node*>>;

// Whether `v` is the template with each of its inputs replaced by one expression (bound into the
// same place of `bound`).
bool unify(const NodeRef& t, const NodeRef& v, const Template& tpl, std::vector<NodeRef>& bound,
           Visited& done) {
  for (size_t i = 0; i < tpl.inputs.size(); i++)
    if (t == tpl.inputs[i]) {
      if (bound[i] && bound[i] != v) return false;
      bound[i] = v;
      return true;
    }
  if (done.count({t.get(), v.get()})) return true;
  if (t->op != v->op || t->dtype != v->dtype || t->arg != v->arg || t->fval != v->fval ||
      t->src.size() != v->src.size())
    return false;
  for (size_t i = 0; i < t->src.size(); i++)
    if (!unify(t->src[i], v->src[i], tpl, bound, done)) return false;
  done.insert({t.get(), v.get()});
  return true;
}

// The expressions `v` applies the template to, or an empty vector
std::vector<NodeRef> template_inputs(const Template* tpl, const NodeRef& v) {
  if (!tpl) return {};
  std::vector<NodeRef> bound(tpl->inputs.size());
  Visited done;
  if (!unify(tpl->expr, v, *tpl, bound, done)) return {};
  return bound;
}

// gelu(x) -> x, else nullptr
NodeRef gelu_input(const NodeRef& v) {
  std::vector<NodeRef> in = template_inputs(gelu_template(), v);
  return in.empty() ? nullptr : in[0];
}

bool plain_load(const NodeRef& n) { return n->op == Op::LOAD && n->src.size() == 2; }

// One GEMM dim made of several loop ranges nested contiguously in every operand that reads them.
struct Dim {
  int64_t size = 1;
  std::vector<int64_t> ranges;  // outermost first
};

// Orders `ranges` by their stride in `order` (outermost first; C's for output dims, A's for K) and
// checks that they nest: for each pair, stride(outer) == size(inner) * stride(inner) in every one of
// `uses`.
bool merge(std::vector<int64_t> ranges, const std::map<int64_t, int64_t>& sizes, const Linear& order,
           const std::vector<const Linear*>& uses, Dim& out) {
  std::sort(ranges.begin(), ranges.end(), [&](int64_t a, int64_t b) { return order.at(a) > order.at(b); });
  out = Dim{1, ranges};
  for (size_t i = 0; i < ranges.size(); i++) {
    out.size *= sizes.at(ranges[i]);
    if (i == 0) continue;
    for (const Linear* u : uses)
      if (u->at(ranges[i - 1]) != sizes.at(ranges[i]) * u->at(ranges[i])) return false;
  }
  return true;
}
int64_t stride(const Dim& d, const Linear& l) { return d.ranges.empty() ? 0 : l.at(d.ranges.back()); }

struct Operand {
  NodeRef load;
  Linear idx;
};

// The GEMM with `a` as A and `b` as B, or nullopt when the loops do not fit that reading.
std::optional<GemmDesc> layout(const Operand& a, const Operand& b, const Linear& c,
                               const std::vector<int64_t>& k_ranges,
                               const std::map<int64_t, int64_t>& sizes) {
  Dim kd;  // the reduce loops (a sum over several dims, such as a weight's gradient over batch and time)
  if (!merge(k_ranges, sizes, a.idx, {&a.idx, &b.idx}, kd)) return std::nullopt;
  std::vector<int64_t> m_ranges, n_ranges, batch_ranges;
  for (auto& [r, coef] : c.coef) {
    bool in_a = a.idx.at(r) != 0, in_b = b.idx.at(r) != 0;
    (in_a && in_b ? batch_ranges : in_a ? m_ranges : in_b ? n_ranges : batch_ranges).push_back(r);
    if (!in_a && !in_b) return std::nullopt;  // C repeats along a dim no operand reads
  }
  // outer M (N) ranges that do not nest with the rest become batch dims B (A) does not read
  Dim m, n, batch;
  while (!merge(m_ranges, sizes, c, {&c, &a.idx}, m)) {
    batch_ranges.push_back(m.ranges.front());
    m_ranges.erase(std::find(m_ranges.begin(), m_ranges.end(), m.ranges.front()));
  }
  while (!merge(n_ranges, sizes, c, {&c, &b.idx}, n)) {
    batch_ranges.push_back(n.ranges.front());
    n_ranges.erase(std::find(n_ranges.begin(), n_ranges.end(), n.ranges.front()));
  }
  if (!merge(batch_ranges, sizes, c, {&c, &a.idx, &b.idx}, batch)) return std::nullopt;
  GemmDesc d;
  d.m = m.size;
  d.n = n.size;
  d.k = kd.size;
  d.batch = batch.size;
  int64_t a_m = stride(m, a.idx), a_k = stride(kd, a.idx), b_k = stride(kd, b.idx), b_n = stride(n, b.idx);
  int64_t c_m = stride(m, c), c_n = stride(n, c);
  if (a_k == 1 && (d.m == 1 || a_m >= d.k)) {
    d.lda = d.m == 1 ? d.k : a_m;
  } else if ((a_m == 1 || d.m == 1) && a_k >= d.m) {
    d.trans_a = true;
    d.lda = a_k;
  } else {
    return std::nullopt;
  }
  if ((b_n == 1 || d.n == 1) && b_k >= d.n) {
    d.ldb = b_k;
  } else if (b_k == 1 && (d.n == 1 || b_n >= d.k)) {
    d.trans_b = true;
    d.ldb = d.n == 1 ? d.k : b_n;
  } else {
    return std::nullopt;
  }
  if (!(c_n == 1 || d.n == 1)) return std::nullopt;
  d.ldc = d.m == 1 ? d.n : c_m;
  if (d.ldc < d.n) return std::nullopt;
  if (d.batch > 1) {
    d.stride_a = stride(batch, a.idx);
    d.stride_b = stride(batch, b.idx);
    d.stride_c = stride(batch, c);
    if (d.stride_c < d.m * d.ldc) return std::nullopt;  // interleaved outputs
  }
  d.a_type = a.load->dtype;
  d.b_type = b.load->dtype;
  return d;
}

// The GEMM one STORE of a kernel with `nouts` outputs computes (its inputs are DEFINE_GLOBAL
// nouts..).
std::optional<MatchedMatmul> match_store(const NodeRef& store, size_t nouts, const ir::Bindings& values) {
  if (store->op != Op::STORE || store->src.size() != 3) return std::nullopt;
  DType out = store->src[2]->dtype;
  if (!gemm_float(out)) return std::nullopt;

  // epilogue, outside in: [cast] [gelu] [+ bias] sum, or [cast] sum * gelu'(aux)
  GemmEpilogue epi = GemmEpilogue::None;
  NodeRef v = strip_casts(store->src[2], out), bias, aux;
  if (NodeRef x = gelu_input(v)) {
    epi = GemmEpilogue::Gelu;
    v = strip_casts(x, out);
  } else if (std::vector<NodeRef> in = template_inputs(gelu_grad_template(), v); !in.empty()) {
    aux = strip_casts(in[0], out);  // the pre-activation, stored in the output's type
    if (!plain_load(aux) || aux->dtype != out) return std::nullopt;
    epi = GemmEpilogue::DGelu;
    v = strip_casts(in[1], out);
  }
  if (v->op == Op::ADD) {
    if (epi == GemmEpilogue::DGelu) return std::nullopt;
    for (int i = 0; i < 2 && !bias; i++) {
      NodeRef sum = strip_casts(v->src[i], out), other = strip_casts(v->src[1 - i], out);
      if (sum->op == Op::REDUCE && plain_load(other) && other->dtype == out) {
        bias = other;
        v = sum;
      }
    }
    if (!bias) return std::nullopt;
    epi = epi == GemmEpilogue::Gelu ? GemmEpilogue::BiasGelu : GemmEpilogue::Bias;
  }
  // sum_k A * B in f32, k one reduce loop or several nested ones
  if (v->op != Op::REDUCE || v->dtype != DType::F32 || v->arg.at(0) != static_cast<int64_t>(Op::ADD) ||
      v->src.size() < 2)
    return std::nullopt;
  std::vector<int64_t> k_ranges;
  for (size_t i = 1; i < v->src.size(); i++) {
    if (v->src[i]->op != Op::RANGE) return std::nullopt;
    k_ranges.push_back(v->src[i]->ival());
  }
  auto is_k = [&](int64_t id) { return std::find(k_ranges.begin(), k_ranges.end(), id) != k_ranges.end(); };
  NodeRef prod = strip_casts(v->src[0], out);
  if (prod->op != Op::MUL) return std::nullopt;
  Operand p{strip_casts(prod->src[0], out), {}}, q{strip_casts(prod->src[1], out), {}};
  if (!plain_load(p.load) || !plain_load(q.load) || p.load->dtype != q.load->dtype ||
      !gemm_float(p.load->dtype))
    return std::nullopt;
  if (prod->dtype != DType::F32 && prod->dtype != p.load->dtype) return std::nullopt;

  // loops
  std::map<int64_t, NodeRef> ranges;
  auto c = linear(store->src[1], ranges, values);
  auto pi = linear(p.load->src[1], ranges, values), qi = linear(q.load->src[1], ranges, values);
  if (!c || !pi || !qi || c->offset != 0) return std::nullopt;
  p.idx = *pi;
  q.idx = *qi;
  std::map<int64_t, int64_t> sizes;
  for (auto& [id, r] : ranges) {
    bool reduce = r->arg.at(2) == ir::kReduceRange;
    if (reduce != is_k(id)) return std::nullopt;  // another reduce loop, or k used as an output loop
    if (!ir::is_symbolic_range(*r)) {
      sizes[id] = r->arg.at(1);
    } else if (auto v = value_of(r->src[0], values)) {
      sizes[id] = *v;
    } else {
      return std::nullopt;
    }
  }
  for (int64_t kr : k_ranges)
    if (c->coef.count(kr) || !p.idx.coef.count(kr) || !q.idx.coef.count(kr)) return std::nullopt;
  std::optional<Linear> bias_idx, aux_idx;
  if (bias && !(bias_idx = linear(bias->src[1], ranges, values))) return std::nullopt;
  if (aux && !(aux_idx = linear(aux->src[1], ranges, values))) return std::nullopt;
  if (aux && aux_idx->coef != c->coef) return std::nullopt;  // the aux matrix is laid out as C
  if (ranges.size() != sizes.size()) return std::nullopt;    // the bias reads loops the product does not

  // Which load is A: the reading that gives a valid layout and a bias along N.
  for (int swap = 0; swap < 2; swap++) {
    const Operand& a = swap ? q : p;
    const Operand& b = swap ? p : q;
    std::optional<GemmDesc> d = layout(a, b, *c, k_ranges, sizes);
    if (!d || (d->m == 1 && d->n == 1)) continue;  // a batch of dot products is a reduction, not a GEMM
    if (bias) {                                    // bias[n]: stride 1 along N (in C's order), no other loop
      bool ok = true;
      for (auto& [r, coef] : bias_idx->coef) ok &= b.idx.at(r) != 0 && a.idx.at(r) == 0;
      int64_t expect = 1;
      std::vector<std::pair<int64_t, int64_t>> by_c;  // (stride in C, range)
      for (auto& [r, coef] : bias_idx->coef) by_c.push_back({c->at(r), r});
      std::sort(by_c.begin(), by_c.end());
      for (auto& [cs, r] : by_c) {
        ok &= bias_idx->at(r) == expect && cs == expect;
        expect *= sizes.at(r);
      }
      ok &= expect == d->n;
      if (!ok) continue;
    }
    if (aux && d->batch != 1) continue;
    d->c_type = out;
    d->epilogue = epi;
    MatchedMatmul m;
    m.desc = *d;
    auto input = [&](const NodeRef& load) {
      return static_cast<int>(load->src[0]->ival()) - static_cast<int>(nouts);
    };
    m.a_input = input(a.load);
    m.b_input = input(b.load);
    m.a_offset = a.idx.offset;
    m.b_offset = b.idx.offset;
    if (bias) {
      m.bias_input = input(bias);
      m.bias_offset = bias_idx->offset;
    }
    if (aux) {
      m.desc.ld_aux = d->ldc;
      m.aux_input = input(aux);
      m.aux_offset = aux_idx->offset;
    }
    return m;
  }
  return std::nullopt;
}

// A kernel storing a GEMM's pre-activation p and gelu(p) (a training forward keeps p for the
// backward): the gelu is C, p the aux matrix, laid out as C and stored in its type.
std::optional<MatchedMatmul> match_gelu_aux(const NodeRef& sink, const ir::Bindings& values) {
  for (size_t i = 0; i < 2; i++) {
    const NodeRef &g = sink->src[i], &p = sink->src[1 - i];
    if (g->op != Op::STORE || p->op != Op::STORE || g->src.size() != 3 || p->src.size() != 3) continue;
    DType out = g->src[2]->dtype;
    NodeRef x = gelu_input(strip_casts(g->src[2], out));
    if (!x || p->src[2]->dtype != out || p->src[1] != g->src[1] ||
        strip_casts(x, out) != strip_casts(p->src[2], out))
      continue;
    std::optional<MatchedMatmul> m = match_store(g, 2, values);
    if (!m || m->desc.batch != 1) continue;
    GemmEpilogue& e = m->desc.epilogue;
    if (e != GemmEpilogue::Gelu && e != GemmEpilogue::BiasGelu) continue;
    e = e == GemmEpilogue::Gelu ? GemmEpilogue::GeluAux : GemmEpilogue::BiasGeluAux;
    m->desc.ld_aux = m->desc.ldc;
    m->c_output = static_cast<int>(g->src[0]->ival());
    m->aux_output = static_cast<int>(p->src[0]->ival());
    return m;
  }
  return std::nullopt;
}

}  // namespace

void set_gelu_graph(GeluGraph build) { gelu_graph.store(build); }
void set_gelu_grad_graph(GeluGradGraph build) { gelu_grad_graph.store(build); }

std::optional<MatchedMatmul> match_matmul_at(const NodeRef& ast, size_t nouts, const ir::Bindings& values) {
  if (ast->op != Op::SINK || ast->src.size() != nouts) return std::nullopt;
  if (nouts == 1) return match_store(ast->src[0], 1, values);
  if (nouts == 2) return match_gelu_aux(ast, values);
  return std::nullopt;
}

std::optional<MatchedMatmul> match_matmul(const Kernel& k) {
  // symbolic sizes: this realize's, from the dims of the tensors the kernel writes and reads that
  // are one variable times constants (B, B * T with T concrete: ir::solve_var); a variable none of
  // them gives leaves the kernel unmatched
  ir::Bindings values;
  if (!k.ast->arg.empty()) {
    std::vector<NodeRef> nodes = k.outputs;
    nodes.insert(nodes.end(), k.inputs.begin(), k.inputs.end());
    for (auto& n : nodes)
      for (size_t d = 0; d < n->sym.size(); d++)
        if (auto v = n->sym[d] ? ir::solve_var(n->sym[d], n->shape[d]) : std::nullopt) values.insert(*v);
  }
  return match_matmul_at(k.ast, k.outputs.size(), values);
}

}  // namespace kiln::schedule
