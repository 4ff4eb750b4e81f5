// Strided views and the attention kernel's AST (see attention_layout.h).
#include "schedule/attention_layout.h"

#include "kiln/error.h"

namespace kiln::schedule {

using ir::NodeRef;
using ir::Op;

namespace {

// The strides of a reshape of (shape, strides) to `to` without a copy: each run of old dims that
// the new dims regroup must be contiguous in memory.
std::optional<std::vector<int64_t>> reshape_strides(const ir::Shape& from,
                                                    const std::vector<int64_t>& strides,
                                                    const ir::Shape& to) {
  std::vector<int64_t> out(to.size(), 0);
  int64_t numel = 1;
  for (auto s : from) numel *= s;
  if (numel == 0 || from.empty()) return out;  // nothing is read, or one element
  int64_t view_d = static_cast<int64_t>(to.size()) - 1, chunk_stride = strides.back(), tensor_numel = 1,
          view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; d--) {
    tensor_numel *= from[static_cast<size_t>(d)];
    bool chunk_ends = d == 0 || (from[static_cast<size_t>(d - 1)] != 1 &&
                                 strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || to[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
      view_numel *= to[static_cast<size_t>(view_d)];
      view_d--;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[static_cast<size_t>(d - 1)];
      tensor_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

std::optional<StridedView> strided_view(const NodeRef& n, const std::function<bool(const NodeRef&)>& stop) {
  std::vector<NodeRef> chain;  // n first, down to the base
  NodeRef x = n;
  auto view = [](const NodeRef& y) {
    return y->op == Op::RESHAPE || y->op == Op::PERMUTE || y->op == Op::EXPAND || y->op == Op::SHRINK;
  };
  while (view(x) && !stop(x)) {
    chain.push_back(x);
    x = x->src[0];
  }
  StridedView v{x, 0, std::vector<int64_t>(x->shape.size(), 1)};
  for (int64_t i = static_cast<int64_t>(x->shape.size()) - 2; i >= 0; i--)
    v.strides[static_cast<size_t>(i)] =
        v.strides[static_cast<size_t>(i) + 1] * x->shape[static_cast<size_t>(i) + 1];
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const NodeRef& y = *it;
    const ir::Shape& in = y->src[0]->shape;
    std::vector<int64_t> s = v.strides;
    switch (y->op) {
      case Op::RESHAPE: {
        auto r = reshape_strides(in, s, y->shape);
        if (!r) return std::nullopt;
        s = *r;
        break;
      }
      case Op::PERMUTE:
        for (size_t i = 0; i < s.size(); i++) s[i] = v.strides[static_cast<size_t>(y->arg[i])];
        break;
      case Op::EXPAND:
        for (size_t i = 0; i < s.size(); i++)
          if (in[i] != y->shape[i]) s[i] = 0;
        break;
      default:  // SHRINK
        for (size_t i = 0; i < s.size(); i++) v.offset += y->arg[2 * i] * s[i];
    }
    v.strides = std::move(s);
  }
  return v;
}

bool attention_reads(const StridedView& v, DType dtype) {
  if (dtype == DType::F32) return !v.strides.empty();  // lse and delta: read an element at a time
  if (v.strides.size() < 2 || v.strides.back() != 1 || v.offset % 8 != 0) return false;
  for (size_t i = 0; i + 1 < v.strides.size(); i++)
    if (v.strides[i] % 8 != 0) return false;
  return true;
}

bool attention_partners(const ir::Node& a, const ir::Node& b) {
  if (a.op != Op::ATTENTION || b.op != Op::ATTENTION || a.src != b.src || a.arg.at(0) != b.arg.at(0) ||
      a.fval != b.fval)
    return false;
  auto pa = ir::attention_part(a.arg), pb = ir::attention_part(b.arg);
  return (pa == ir::AttentionPart::Out && pb == ir::AttentionPart::Lse) ||
         (pa == ir::AttentionPart::Lse && pb == ir::AttentionPart::Out);
}

NodeRef attention_ast(const std::vector<NodeRef>& outs, const std::function<bool(const NodeRef&)>& stop,
                      std::vector<NodeRef>& bases) {
  const NodeRef& n = outs.at(0);
  ir::AttentionLayout l;
  l.with_lse = outs.size() > 1;
  const NodeRef& q = n->src.at(0);
  size_t r = q->shape.size();
  l.causal = n->arg.at(0) != 0;
  l.part = ir::attention_part(n->arg);
  l.tq = q->shape[r - 2];
  l.tk = n->src[1]->shape[r - 2];
  l.d = q->shape[r - 1];
  l.batch.assign(q->shape.begin(), q->shape.end() - 2);
  std::vector<NodeRef> globals;
  for (size_t i = 0; i < n->src.size(); i++) {
    const NodeRef& s = n->src[i];
    auto v = strided_view(s, stop);
    if (!v || !attention_reads(*v, s->dtype))
      throw Error("kiln.schedule: the attention kernel " + n->str() + " cannot read its operand " +
                  std::to_string(i) + " " + s->str() + " in place");
    size_t g = 0;
    while (g < bases.size() && bases[g] != v->base) g++;
    if (g == bases.size()) bases.push_back(v->base);
    globals.push_back(ir::make(Op::DEFINE_GLOBAL, s->dtype, {}, {}, {static_cast<int64_t>(g + outs.size())}));
    size_t rows = s->shape.size() - (s->dtype == DType::F32 ? 1 : 2);  // the dim of the rows
    ir::AttentionLayout::Operand o;
    o.offset = v->offset;
    o.row_stride = v->strides[rows];
    o.batch_strides.assign(v->strides.begin(), v->strides.begin() + static_cast<int64_t>(rows));
    l.operands.push_back(std::move(o));
  }
  NodeRef a = ir::make(Op::ATTENTION, n->dtype, {}, globals, l.args(), n->fval);
  return ir::make(Op::SINK, n->dtype, {}, {a});
}

}  // namespace kiln::schedule
