// Tensor creation: constants, ranges and eye (random tensors are in random.cpp).
#include <cmath>
#include <sstream>

#include "frontend/graph.h"
#include "kiln/tensor.h"
#include "runtime/buffer.h"

namespace kiln {

using frontend::check_shape;
using frontend::fail;
using frontend::place;
using ir::NodeRef;
using ir::Op;

namespace {
NodeRef iota(const Shape& s, int64_t d, DType t) { return ir::make(Op::IOTA, t, s, {}, {d}); }
}  // namespace

Tensor full(Shape s, Scalar v, std::optional<DType> dtype) {
  check_shape("full", s);
  DType t = dtype                           ? *dtype
            : v.kind == Scalar::Kind::Float ? kDefaultFloat
            : v.kind == Scalar::Kind::Int   ? DType::I64
                                            : DType::Bool;
  return Tensor(frontend::full(s, v, t));
}

Tensor zeros(Shape s, TensorOptions o) {
  check_shape("zeros", s);
  return place(full(std::move(s), 0.0, o.dtype), o.device);
}
Tensor ones(Shape s, TensorOptions o) {
  check_shape("ones", s);
  return place(full(std::move(s), 1.0, o.dtype), o.device);
}
Tensor zeros_like(const Tensor& t) { return place(full(t.shape(), 0.0, t.dtype()), frontend::own_device(t)); }
Tensor ones_like(const Tensor& t) { return place(full(t.shape(), 1.0, t.dtype()), frontend::own_device(t)); }
Tensor full_like(const Tensor& t, Scalar v) {
  return place(full(t.shape(), v, t.dtype()), frontend::own_device(t));
}

Tensor arange(int64_t end, TensorOptions o) {
  if (end < 0) fail("arange", "end must be >= 0, got " + std::to_string(end));
  return place(Tensor(iota({end}, 0, o.dtype)), o.device);
}

Tensor arange(double start, double end, double step, std::optional<DType> dtype) {
  auto values = [&] {
    std::ostringstream os;
    os << "start " << start << ", end " << end << ", step " << step;
    return os.str();
  };
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    fail("arange", "start, end and step must be finite, got " + values());
  if (step == 0) fail("arange", "step must be nonzero, got " + values());
  double n = std::ceil((end - start) / step);  // +-inf when end - start overflows
  if (n >= 0x1p63) {
    std::ostringstream os;
    os << values() << " make " << n << " elements, more than int64 can count";
    fail("arange", os.str());
  }
  int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  bool integral = start == std::floor(start) && step == std::floor(step) && end == std::floor(end);
  DType t = dtype ? *dtype : integral ? DType::I64 : kDefaultFloat;
  DType calc = is_float(t) ? DType::F64 : DType::I64;
  Tensor i(iota({count}, 0, calc));
  return (i * step + start).to(t);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions o) {
  int64_t cols = m ? *m : n;
  check_shape("eye", {n, cols});
  Tensor r(iota({n, cols}, 0, DType::I64)), c(iota({n, cols}, 1, DType::I64));
  return place((r == c).to(o.dtype), o.device);
}

namespace frontend {
// A constant given a device belongs to it (unrealized); other graphs move when it is not the default.
Tensor place(const Tensor& t, std::optional<Device> d) {
  if (d && t.node()->op == ir::Op::CONST)
    return Tensor(ir::pinned_const(t.node(), static_cast<int8_t>(d->code())));
  return !d || *d == default_device() ? t : t.to(*d);
}

std::optional<Device> own_device(const Tensor& t) {
  int8_t code = t.node()->device;
  if (code >= 0) return Device::from_code(code);
  if (t.node()->buffer) return t.node()->buffer->device;
  return std::nullopt;
}
}  // namespace frontend

}  // namespace kiln
