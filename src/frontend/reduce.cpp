// Reductions over dims (sum, max, min, prod, mean), softmax, and matmul (and F::linear) as
// multiply + sum.
#include <algorithm>
#include <limits>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "ir/simplify.h"
#include "ir/symbolic.h"
#include "kiln/functional.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::AutocastList;
using frontend::AutocastOp;
using frontend::fail;
using ir::NodeRef;
using ir::Op;

namespace {

std::vector<int64_t> norm_dims(const char* op, std::vector<int64_t> dims, int64_t ndim) {
  if (dims.empty())
    for (int64_t i = 0; i < ndim; i++) dims.push_back(i);
  for (auto& d : dims) d = frontend::norm_dim(op, d, ndim);
  for (size_t i = 0; i < dims.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (dims[i] == dims[j])
        frontend::fail(op, "dim " + std::to_string(dims[i]) + " appears more than once in the dims");
  if (ndim == 0) dims.clear();
  return dims;
}

Tensor finish(const Tensor& x, NodeRef r, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return Tensor(r);
  Shape s;
  for (int64_t i = 0; i < x.dim(); i++)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) s.push_back(x.shape()[i]);
  return Tensor(frontend::reshape(r, s));
}

Tensor reduce(const char* op, Op rop, const Tensor& x, std::vector<int64_t> dims, bool keepdim, DType acc,
              DType out) {
  dims = norm_dims(op, dims, x.dim());
  NodeRef r = frontend::reduce(rop, x.to(acc).node(), dims);
  return finish(x, frontend::cast(r, out), dims, keepdim);
}

// Accumulate half types in f32 and small ints in i64, as PyTorch does.
DType sum_out(DType t) { return is_float(t) ? t : DType::I64; }
DType acc_of(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

// An order-reversing map (float: -x; int: ~x, which cannot overflow; bool: not), so min = inv(max(inv(x))).
Tensor invert(const Tensor& x) { return is_float(x.dtype()) ? -x : ~x; }

}  // namespace

Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).sum(dims, keepdim);
  DType out = sum_out(dtype());
  return reduce("sum", Op::ADD, *this, dims, keepdim, acc_of(out), out);
}
Tensor Tensor::prod(std::vector<int64_t> dims, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).prod(dims, keepdim);
  DType out = sum_out(dtype());
  return reduce("prod", Op::MUL, *this, dims, keepdim, acc_of(out), out);
}
Tensor Tensor::max(std::vector<int64_t> dims, bool keepdim) const {
  return reduce("max", Op::MAX, *this, dims, keepdim, dtype(), dtype());
}
Tensor Tensor::min(std::vector<int64_t> dims, bool keepdim) const {
  return invert(invert(*this).max(dims, keepdim));
}
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).mean(dims, keepdim);
  auto nd = norm_dims("mean", dims, dim());
  int64_t count = 1;
  ir::NodeRef symbolic_count = ir::const_int(1);  // the count over symbolic dims as an expression
  bool symbolic = false;
  for (auto d : nd) {
    count *= shape()[d];
    symbolic |= !node()->sym.empty() && node()->sym[d];
    symbolic_count = ir::simplify(symbolic_count * ir::dim_expr(node(), d));
  }
  DType out = float_result(dtype());
  Tensor s = reduce("mean", Op::ADD, *this, nd, keepdim, acc_of(out), acc_of(out));
  if (symbolic) return (s * Tensor(symbolic_count).to(acc_of(out)).reciprocal()).to(out);
  return (s * (1.0 / static_cast<double>(count))).to(out);
}

Tensor Tensor::softmax(int64_t d) const {
  if (AutocastOp ac{AutocastList::F32}) return ac(*this).softmax(d);
  Tensor x = to(acc_of(float_result(dtype())));
  Tensor e = (x - x.max(d, true).detach()).exp();                      // the shift's gradient is exactly 0
  return (e * e.sum(d, true).reciprocal()).to(float_result(dtype()));  // one reciprocal a row
}

Tensor Tensor::dot(const Tensor& o) const {
  if (AutocastOp ac{AutocastList::Lower}) return ac(*this).dot(ac(o));
  if (dim() != 1 || o.dim() != 1 || size(0) != o.size(0))
    fail("dot",
         "needs two 1-D tensors of one length, got " + shape_str(shape()) + " and " + shape_str(o.shape()));
  return (*this * o).sum();
}

namespace {

// (..., n, k) x (..., k, m): (..., n, 1, k) * (..., 1, m, k) summed over the last dim. Half inputs
// multiply exactly in f32 registers and sum in f32 (sum's accumulator), then round; with
// `keep_acc` the sum stays in its accumulator's dtype, unrounded.
Tensor matmul_of(const Tensor& x, const Tensor& o, bool keep_acc) {
  if (x.dim() == 0 || o.dim() == 0)
    fail("matmul",
         "both arguments need at least 1 dim, got " + shape_str(x.shape()) + " and " + shape_str(o.shape()));
  if (x.dim() == 1 && o.dim() == 1 && !keep_acc) return x.dot(o);
  Tensor a = x.dim() == 1 ? x.unsqueeze(0) : x;
  Tensor b = o.dim() == 1 ? o.unsqueeze(1) : o;
  int64_t k = a.size(-1);
  if (b.size(-2) != k)
    fail("matmul", "shapes " + shape_str(x.shape()) + " and " + shape_str(o.shape()) +
                       " cannot be multiplied (" + std::to_string(k) + " vs " + std::to_string(b.size(-2)) +
                       ")");
  Shape out = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                               Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  out.insert(out.end(), {a.size(-2), b.size(-1)});
  frontend::check_shape("matmul", out);
  out.push_back(k);
  if (!ir::checked_numel(out))
    fail("matmul", "shapes " + shape_str(x.shape()) + " and " + shape_str(o.shape()) +
                       ": the product is computed as a broadcast multiply of shape " + shape_str(out) +
                       ", which has more elements than int64 can count");
  Tensor prod = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3);
  DType acc = acc_of(sum_out(prod.dtype()));
  Tensor r = keep_acc ? reduce("matmul", Op::ADD, prod, {-1}, false, acc, acc) : prod.sum(-1);
  if (x.dim() == 1) r = r.squeeze(-2);
  if (o.dim() == 1) r = r.squeeze(-1);
  return r;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& o) const {
  if (AutocastOp ac{AutocastList::Lower}) return ac(*this).matmul(ac(o));
  return matmul_of(*this, o, false);
}
Tensor matmul(const Tensor& a, const Tensor& b) { return a.matmul(b); }

Tensor nn::functional::linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (AutocastOp ac{AutocastList::Lower}) return linear(ac(input), ac(weight), ac(bias));
  if (weight.dim() != 2 || input.dim() < 1 || input.size(-1) != weight.size(1))
    fail("linear", "expected input (..., in) and weight (out, in), got input " + shape_str(input.shape()) +
                       " and weight " + shape_str(weight.shape()));
  if (bias && bias->defined() && bias->shape() != Shape{weight.size(0)})
    fail("linear",
         "bias must have shape (" + std::to_string(weight.size(0)) + ",), got " + shape_str(bias->shape()));
  if (!bias || !bias->defined()) return input.matmul(weight.t());
  // the bias is added to the unrounded sums (one rounding, as a GEMM's bias epilogue does)
  Tensor y = matmul_of(input, weight.t(), true);
  DType out = promote_types(sum_out(promote_types(input.dtype(), weight.dtype())), bias->dtype());
  return (y + bias->to(y.dtype())).to(out);
}

}  // namespace kiln
