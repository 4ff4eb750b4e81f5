// Loss functions (cross entropy, NLL, regression and binary losses, KL divergence) as composites of
// tensor ops, matching torch.nn.functional including weights, ignore_index and label smoothing.
#include <cmath>

#include "frontend/autocast.h"
#include "frontend/checks.h"
#include "frontend/graph.h"
#include "kiln/functional.h"

namespace kiln::nn::functional {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::fail;

namespace {

enum class Reduction { Mean, Sum, None, BatchMean };

Reduction parse_reduction(const char* op, const std::string& r, bool batchmean = false) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  if (batchmean && r == "batchmean") return Reduction::BatchMean;
  fail(op, "reduction must be \"mean\", \"sum\" or \"none\"" +
               std::string(batchmean ? " or \"batchmean\"" : "") + ", got \"" + r + "\"");
}

DType calc_of(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

void need_float(const char* op, const char* what, const Tensor& x) {
  if (!is_float(x.dtype()))
    fail(op, std::string(what) + " must be a float tensor, got " + to_string(x.dtype()) + " of shape " +
                 shape_str(x.shape()));
}

// mean / sum / none of an elementwise loss, rounded to `out`
Tensor reduce(const Tensor& loss, Reduction r, DType out) {
  switch (r) {
    case Reduction::None: return loss.to(out);
    case Reduction::Sum: return loss.sum().to(out);
    case Reduction::Mean: return loss.mean().to(out);
    case Reduction::BatchMean:
      return (loss.sum() * (1.0 / static_cast<double>(loss.dim() ? loss.size(0) : 1))).to(out);
  }
  return loss;
}

// log_softmax over dim d, computed stably: (x - max) - log(sum(exp(x - max)))
Tensor log_softmax_stable(const Tensor& x, int64_t d) {
  Tensor s = x - x.max(d, true).detach();  // the shift's gradient is exactly 0
  return s - s.exp().sum(d, true).log();
}

// (C,) -> (1, C, 1, ...) along class dim cd of an ndim-dim input
Tensor along(const Tensor& v, int64_t cd, int64_t ndim) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[static_cast<size_t>(cd)] = v.numel();
  return v.reshape(s);
}

// NLL of class-index targets on log-probabilities lp (C on dim cd), with label smoothing eps.
Tensor class_index_loss(const char* op, const Tensor& lp, const Tensor& target,
                        const std::optional<Tensor>& weight, int64_t ignore_index, Reduction red, double eps,
                        DType out) {
  int64_t cd = lp.dim() == 1 ? 0 : 1, c = lp.size(cd), nd = lp.dim();
  Shape want = lp.shape();
  want.erase(want.begin() + cd);
  if (target.shape() != want)
    fail(op, "class-index target must have shape " + shape_str(want) + " for input " + shape_str(lp.shape()) +
                 ", got " + shape_str(target.shape()));
  if (weight && weight->defined() && weight->shape() != Shape{c})
    fail(op, "weight must have shape " + shape_str({c}) + ", got " + shape_str(weight->shape()));
  Tensor ti = target.to(DType::I64);
  frontend::require((((ti >= Scalar(0)) & (ti < Scalar(static_cast<long long>(c)))) |
                     (ti == Scalar(static_cast<long long>(ignore_index))))
                        .all(),
                    std::string(op) + ": a target class is out of range: target " +
                        shape_str(target.shape()) + " " + to_string(target.dtype()) + " on " +
                        target.device().str() + " must lie in [0, " + std::to_string(c) +
                        ") (or be ignore_index " + std::to_string(ignore_index) + ") for input " +
                        shape_str(lp.shape()));
  Tensor t = ti.unsqueeze(cd);                 // class dim of size 1
  Tensor hit = t == along(arange(c), cd, nd);  // input's shape
  Tensor valid = t != full({}, Scalar(static_cast<long long>(ignore_index)), DType::I64);
  bool weighted = weight && weight->defined();
  Tensor w = weighted ? along(weight->to(lp.dtype()), cd, nd) : ones({}, {.dtype = lp.dtype()});
  // per element of the input: the loss contribution and the target's weight (0 where ignored)
  Tensor contrib;
  if (eps == 0) {
    contrib = where(hit & valid, lp * -1.0 * w, 0.0);
  } else {
    Tensor coef = where(hit, full({}, 1 - eps + eps / static_cast<double>(c), lp.dtype()),
                        full({}, eps / static_cast<double>(c), lp.dtype()));
    contrib = where(valid, lp * -1.0 * w * coef, 0.0);
  }
  if (red == Reduction::None) return contrib.sum(cd).to(out);
  if (red == Reduction::Sum) return contrib.sum().to(out);
  // mean: divided by the summed weights of the non-ignored targets (NaN when all are ignored)
  Tensor tw = where(hit & valid, w, 0.0);
  return (contrib.sum() / tw.sum()).to(out);
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  if (AutocastOp ac{AutocastList::F32})
    return cross_entropy(ac(input), ac(target), ac(weight), ignore_index, reduction, label_smoothing);
  Reduction red = parse_reduction("cross_entropy", reduction);
  need_float("cross_entropy", "input", input);
  if (input.dim() == 0)
    fail("cross_entropy", "input must have at least 1 dim (C) or (N, C, ...), got a scalar");
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    fail("cross_entropy", "label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  int64_t cd = input.dim() == 1 ? 0 : 1, c = input.size(cd);
  Tensor lp = log_softmax_stable(input.to(calc_of(input.dtype())), cd);
  if (!is_float(target.dtype())) {
    if (target.dtype() == DType::Bool)
      fail("cross_entropy", "target must be integer class indices or float probabilities, got bool");
    return class_index_loss("cross_entropy", lp, target, weight, ignore_index, red, label_smoothing,
                            input.dtype());
  }
  // class probabilities
  if (target.shape() != input.shape())
    fail("cross_entropy", "probability target must have the input's shape " + shape_str(input.shape()) +
                              " (or be integer class indices), got " + shape_str(target.shape()));
  if (weight && weight->defined() && weight->shape() != Shape{c})
    fail("cross_entropy", "weight must have shape " + shape_str({c}) + ", got " + shape_str(weight->shape()));
  Tensor t = target.to(lp.dtype());
  if (label_smoothing > 0) t = t * (1 - label_smoothing) + label_smoothing / static_cast<double>(c);
  Tensor prod = lp * t * -1.0;
  if (weight && weight->defined()) prod = prod * along(weight->to(lp.dtype()), cd, input.dim());
  if (red == Reduction::None) return prod.sum(cd).to(input.dtype());
  if (red == Reduction::Sum) return prod.sum().to(input.dtype());
  double count = c ? static_cast<double>(input.numel() / c) : 0.0;
  return (prod.sum() / full({}, count, lp.dtype())).to(input.dtype());
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                int64_t ignore_index, const std::string& reduction) {
  if (AutocastOp ac{AutocastList::F32})
    return nll_loss(ac(input), target, ac(weight), ignore_index, reduction);
  Reduction red = parse_reduction("nll_loss", reduction);
  need_float("nll_loss", "input", input);
  if (input.dim() == 0) fail("nll_loss", "input must have at least 1 dim (C) or (N, C, ...), got a scalar");
  if (!is_int(target.dtype()))
    fail("nll_loss", "target must be integer class indices, got " + to_string(target.dtype()));
  return class_index_loss("nll_loss", input.to(calc_of(input.dtype())), target, weight, ignore_index, red, 0,
                          input.dtype());
}

namespace {
// input and target of a pointwise loss: broadcast, float, computed in f32 for half types
std::pair<Tensor, Tensor> pointwise_args(const char* op, const Tensor& input, const Tensor& target) {
  need_float(op, "input", input);
  broadcast_shapes(input.shape(), target.shape(), op);
  DType t = calc_of(float_result(promote_types(input.dtype(), target.dtype())));
  return {input.to(t), target.to(t)};
}
DType out_of(const Tensor& input, const Tensor& target) {
  return float_result(promote_types(input.dtype(), target.dtype()));
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (AutocastOp ac{AutocastList::F32}) return mse_loss(ac(input), ac(target), reduction);
  Reduction red = parse_reduction("mse_loss", reduction);
  auto [x, y] = pointwise_args("mse_loss", input, target);
  Tensor d = x - y;
  return reduce(d * d, red, out_of(input, target));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (AutocastOp ac{AutocastList::F32}) return l1_loss(ac(input), ac(target), reduction);
  Reduction red = parse_reduction("l1_loss", reduction);
  auto [x, y] = pointwise_args("l1_loss", input, target);
  return reduce((x - y).abs(), red, out_of(input, target));
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  if (AutocastOp ac{AutocastList::F32}) return smooth_l1_loss(ac(input), ac(target), reduction, beta);
  Reduction red = parse_reduction("smooth_l1_loss", reduction);
  if (!(beta >= 0)) fail("smooth_l1_loss", "beta must be >= 0, got " + std::to_string(beta));
  auto [x, y] = pointwise_args("smooth_l1_loss", input, target);
  Tensor d = (x - y).abs();
  if (beta == 0) return reduce(d, red, out_of(input, target));
  return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), red, out_of(input, target));
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  if (AutocastOp ac{AutocastList::F32}) return huber_loss(ac(input), ac(target), reduction, delta);
  Reduction red = parse_reduction("huber_loss", reduction);
  if (!(delta > 0)) fail("huber_loss", "delta must be > 0, got " + std::to_string(delta));
  auto [x, y] = pointwise_args("huber_loss", input, target);
  Tensor d = (x - y).abs();
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), red, out_of(input, target));
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            const std::string& reduction) {
  if (AutocastOp ac{AutocastList::F32})
    return binary_cross_entropy(ac(input), ac(target), ac(weight), reduction);
  Reduction red = parse_reduction("binary_cross_entropy", reduction);
  if (input.shape() != target.shape())
    fail("binary_cross_entropy",
         "target shape " + shape_str(target.shape()) + " must equal input shape " + shape_str(input.shape()));
  auto [x, y] = pointwise_args("binary_cross_entropy", input, target);
  // -(t log x + (1 - t) log(1 - x)), each log clamped to >= -100 as PyTorch
  Tensor lo = full({}, -100.0, x.dtype());
  Tensor loss = (y - 1.0) * maximum((x * -1.0).log1p(), lo) - y * maximum(x.log(), lo);
  if (weight && weight->defined()) {
    broadcast_shapes(weight->shape(), input.shape(), "binary_cross_entropy");
    loss = loss * weight->to(x.dtype());
  }
  return reduce(loss, red, out_of(input, target));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight, const std::string& reduction,
                                        const std::optional<Tensor>& pos_weight) {
  if (AutocastOp ac{AutocastList::F32})
    return binary_cross_entropy_with_logits(ac(input), ac(target), ac(weight), reduction, ac(pos_weight));
  Reduction red = parse_reduction("binary_cross_entropy_with_logits", reduction);
  if (input.shape() != target.shape())
    fail("binary_cross_entropy_with_logits",
         "target shape " + shape_str(target.shape()) + " must equal input shape " + shape_str(input.shape()));
  auto [x, y] = pointwise_args("binary_cross_entropy_with_logits", input, target);
  // (1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x)
  Tensor ls = x.logsigmoid();
  if (pos_weight && pos_weight->defined()) {
    broadcast_shapes(pos_weight->shape(), input.shape(), "binary_cross_entropy_with_logits");
    ls = ls * ((pos_weight->to(x.dtype()) - 1.0) * y + 1.0);
  }
  Tensor loss = (1.0 - y) * x - ls;
  if (weight && weight->defined()) {
    broadcast_shapes(weight->shape(), input.shape(), "binary_cross_entropy_with_logits");
    loss = loss * weight->to(x.dtype());
  }
  return reduce(loss, red, out_of(input, target));
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  if (AutocastOp ac{AutocastList::F32}) return kl_div(ac(input), ac(target), reduction, log_target);
  Reduction red = parse_reduction("kl_div", reduction, true);
  auto [x, y] = pointwise_args("kl_div", input, target);
  // log_target: e^t (t - x); else xlogy(t, t) - t x, with 0 log 0 = 0
  Tensor loss = log_target ? y.exp() * (y - x) : where(y == 0.0, 0.0, y * y.log()) - y * x;
  return reduce(loss, red, out_of(input, target));
}

}  // namespace kiln::nn::functional
