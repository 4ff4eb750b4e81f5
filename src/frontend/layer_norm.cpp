// LAYER_NORM nodes (see layer_norm.h): making them, their composite and their gradient. The composite
// is the one definition of what every part computes from primitive ops; the rewrite rule registered
// here puts it in place of each node no runner takes.
#include "frontend/layer_norm.h"

#include <atomic>
#include <unordered_map>

#include "engine/runners.h"
#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "ir/graph_rewrite.h"
#include "ir/rewrite.h"
#include "kiln/debug.h"

namespace kiln::frontend {

namespace {

using ir::LayerNormPart;
using ir::NodeRef;

// The statistics' and the composite's dtype: f32 for 16-bit and f32 data, f64 for f64.
DType calc_of(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

NodeRef lower_layer_norm(const NodeRef& n) {
  if (engine::node_runs(*n)) return nullptr;
  Autocast plain(std::nullopt);  // the composite computes in the node's dtypes, whatever scope realizes it
  return layer_norm_composite(n).node();
}

// the graph rewrites lower LAYER_NORM nodes with it; registered as the program starts, by the file
// that makes LAYER_NORM nodes
[[maybe_unused]] const bool lowering_registered =
    (ir::set_lowering(ir::Op::LAYER_NORM, &lower_layer_norm), true);

// The gradients of the sources of n through its composite, each source a leaf: the composite is
// differentiated over stand-ins of the sources (the statistics and dy of a backward part depend on
// x too, and the walk from n goes on through them itself), which the gradients then name again.
std::vector<std::optional<Tensor>> composite_backward(const NodeRef& n, const Tensor& g) {
  static std::atomic<int64_t> made{0};
  std::vector<Tensor> stand_ins;
  std::unordered_map<const ir::Node*, NodeRef> back;
  for (const NodeRef& s : n->src) {
    if (s->device < 0) {  // a graph of constants: no gradient flows below it
      stand_ins.push_back(Tensor(s));
      continue;
    }
    NodeRef p = ir::make(ir::Op::BUFFER, s->dtype, s->shape, {}, {-1 - made++, s->device});  // no buffer
    back[p.get()] = s;
    stand_ins.push_back(Tensor(p));
  }
  std::vector<NodeRef> src;
  for (const Tensor& t : stand_ins) src.push_back(t.node());
  NodeRef copy = ir::make(ir::Op::LAYER_NORM, n->dtype, n->shape, src, n->arg, n->fval);
  std::vector<Tensor> grads = kiln::grad({layer_norm_composite(copy)}, stand_ins, {g});
  std::vector<std::optional<Tensor>> out;
  for (const Tensor& gr : grads) out.push_back(Tensor(ir::substitute(gr.node(), back)));
  return out;
}

}  // namespace

bool layer_norm_nodes_apply(const Tensor& input) {
  const std::string& mode = settings().layernorm;
  if (mode != "tile" && mode != "generated")
    fail("layer_norm",
         "KILN_LAYERNORM (settings().layernorm) must be 'tile' or 'generated', got '" + mode + "'");
  return mode == "tile" && input.numel() > 0 && is_float(input.dtype());
}

NodeRef layer_norm_part(LayerNormPart part, const std::vector<NodeRef>& src, double eps) {
  const bool fwd = ir::is_forward(part);
  const NodeRef &x = fwd ? src.at(0) : src.at(1), &w = fwd ? src.at(1) : src.at(2);
  const int64_t N = x->shape.at(0), C = x->shape.at(1);
  Shape s;
  DType t = x->dtype;
  switch (part) {
    case LayerNormPart::Y:
    case LayerNormPart::Dx: s = {N, C}; break;
    case LayerNormPart::Mean:
    case LayerNormPart::Rstd: s = {N}, t = calc_of(x->dtype); break;
    case LayerNormPart::Dweight:
    case LayerNormPart::Dbias: s = {C}, t = w->dtype; break;
  }
  return ir::make(ir::Op::LAYER_NORM, t, s, src, {static_cast<int64_t>(part)}, eps);
}

Tensor layer_norm_node(const Tensor& input, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  int64_t C = 1;
  for (int64_t d : normalized_shape) C *= d;
  const DType t = input.dtype();
  const TensorOptions like{.dtype = t, .device = input.device()};
  Tensor x = input.reshape({input.numel() / C, C});
  Tensor w = weight && weight->defined() ? weight->reshape({C}).to(t) : ones({C}, like);
  Tensor b = bias && bias->defined() ? bias->reshape({C}).to(t) : zeros({C}, like);
  return Tensor(layer_norm_part(LayerNormPart::Y, {x.node(), w.node(), b.node()}, eps))
      .reshape(input.shape());
}

Tensor layer_norm_composite(const NodeRef& n) {
  const LayerNormPart part = ir::layer_norm_part(n->arg);
  const bool fwd = ir::is_forward(part);
  const DType calc = calc_of(fwd ? n->src[0]->dtype : n->src[1]->dtype);
  auto src = [&](size_t i) { return Tensor(n->src[i]).to(calc); };
  if (fwd) {
    Tensor x = src(0), mean = x.mean({1}, true), d = x - mean;
    Tensor rstd = ((d * d).mean({1}, true) + n->fval).rsqrt();
    if (part == LayerNormPart::Mean) return mean.reshape({x.size(0)}).to(n->dtype);
    if (part == LayerNormPart::Rstd) return rstd.reshape({x.size(0)}).to(n->dtype);
    return (d * rstd * src(1) + src(2)).to(n->dtype);
  }
  Tensor dy = src(0), x = src(1), w = src(2), mean = src(3).unsqueeze(1), rstd = src(4).unsqueeze(1);
  Tensor xhat = (x - mean) * rstd;
  if (part == LayerNormPart::Dweight) return (dy * xhat).sum({0}).to(n->dtype);
  if (part == LayerNormPart::Dbias) return dy.sum({0}).to(n->dtype);
  Tensor g = dy * w;
  return (rstd * (g - g.mean({1}, true) - xhat * (g * xhat).mean({1}, true))).to(n->dtype);
}

std::vector<std::optional<Tensor>> layer_norm_backward(const NodeRef& n, const Tensor& g) {
  const LayerNormPart part = ir::layer_norm_part(n->arg);
  if (part != LayerNormPart::Y) return composite_backward(n, g);
  const double eps = n->fval;
  NodeRef mean = layer_norm_part(LayerNormPart::Mean, n->src, eps),
          rstd = layer_norm_part(LayerNormPart::Rstd, n->src, eps);
  std::vector<NodeRef> src{g.to(n->dtype).node(), n->src[0], n->src[1], mean, rstd};
  return {Tensor(layer_norm_part(LayerNormPart::Dx, src, eps)),
          Tensor(layer_norm_part(LayerNormPart::Dweight, src, eps)),
          Tensor(layer_norm_part(LayerNormPart::Dbias, src, eps))};
}

}  // namespace kiln::frontend
