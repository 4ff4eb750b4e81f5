// Tensor handle: properties, realization, reading values, printing, dtype conversion.
#include "kiln/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <new>
#include <sstream>

#include "engine/realize.h"
#include "frontend/checks.h"
#include "frontend/graph.h"
#include "frontend/jit_recorder.h"
#include "frontend/tensor_impl.h"
#include "runtime/buffer.h"

namespace kiln {

using frontend::fail;
using ir::NodeRef;

namespace {

// Computes the tensors' graphs, one schedule per device in the order the devices first appear.
void compute(const std::vector<Tensor>& ts) {
  std::vector<std::pair<Device, std::vector<NodeRef>>> groups;
  for (auto& t : ts) {
    if (t.node()->op == ir::Op::BUFFER) continue;
    Device d = t.device();
    auto g = std::find_if(groups.begin(), groups.end(), [&](auto& e) { return e.first == d; });
    if (g == groups.end()) g = groups.insert(groups.end(), {d, {}});
    g->second.push_back(t.node());
  }
  for (auto& [d, roots] : groups) engine::realize(roots, d);
}

// Points a computed tensor at its buffer, so the graph behind it can be freed (unless autograd will
// differentiate through it: then the realized node keeps its graph and its buffer).
void bind_to_buffer(const std::shared_ptr<Tensor::Impl>& impl) {
  NodeRef& n = impl->node;
  if (!frontend::is_buffer_node(*n) && !autograd::graph_requires_grad(n))
    n = frontend::buffer_node(n->buffer, n->shape, n->sym);
  if (impl->leaf && n->op == ir::Op::BUFFER) autograd::register_leaf(impl);  // after assign_
  if (jit::Recording* r = jit::active()) r->realized.push_back(impl);
}

// Whether n is, or reads, an EXPAND that grows its input: realizing n would store the broadcast.
bool reads_a_broadcast(const ir::Node& n) {
  auto grows = [](const ir::Node& x) { return x.op == ir::Op::EXPAND && x.numel() > x.src[0]->numel(); };
  if (grows(n)) return true;
  for (auto& s : n.src)
    if (grows(*s)) return true;
  return false;
}

}  // namespace

Tensor::Tensor(std::shared_ptr<const ir::Node> node) : impl_(std::make_shared<Impl>()) {
  // results made while gradients are off are detached: no gradient flows back through them
  if (!grad_enabled() && node->op != ir::Op::BUFFER && node->op != ir::Op::DETACH)
    node = ir::make(ir::Op::DETACH, node->dtype, node->shape, {node});
  impl_->node = std::move(node);
  // A lazy graph deeper than kMaxLazyDepth is computed now (a loss summed over 10^6 steps): its
  // graph stays small, and so do the realize that reads it and the kernel that computes it. Values
  // do not change: this is one more kernel boundary (f16/bf16 values are rounded there, as at any).
  // Not where the node reads a broadcast (a matmul's product before its sum): its consumer, one
  // deeper, is realized instead.
  if (impl_->node->depth > frontend::kMaxLazyDepth && !engine::realizing() &&
      !reads_a_broadcast(*impl_->node)) {
    compute({*this});
    bind_to_buffer(impl_);
  }
}

const std::shared_ptr<const ir::Node>& Tensor::node() const {
  if (!impl_) throw Error("kiln: use of an undefined tensor");
  return impl_->node;
}
const Shape& Tensor::shape() const { return node()->shape; }
DType Tensor::dtype() const { return node()->dtype; }
int64_t Tensor::numel() const { return node()->numel(); }
int64_t Tensor::size(int64_t d) const { return shape()[frontend::norm_dim("size", d, dim())]; }

NodeRef frontend::buffer_node(const std::shared_ptr<Buffer>& b, const Shape& s) {
  NodeRef n = ir::make(ir::Op::BUFFER, b->dtype, s, {}, {b->id, b->device.code()});
  n->buffer = b;
  return n;
}
NodeRef frontend::buffer_node(const std::shared_ptr<Buffer>& b, const Shape& s, std::vector<NodeRef> sym) {
  NodeRef n = buffer_node(b, s);
  if (std::none_of(sym.begin(), sym.end(), [](const NodeRef& e) { return e != nullptr; })) return n;
  NodeRef mark = ir::make_sym(ir::Op::RESHAPE, b->dtype, s, {n}, {}, std::move(sym));
  ir::set_buffer(*mark, b);
  return mark;
}
bool frontend::is_buffer_node(const ir::Node& n) {
  return n.op == ir::Op::BUFFER || (n.op == ir::Op::RESHAPE && n.buffer && n.src[0]->op == ir::Op::BUFFER &&
                                    n.src[0]->buffer == n.buffer);
}
using frontend::buffer_node;

void realize(const std::vector<Tensor>& wanted) {
  // device-side checks registered since the last realize run in the same schedules
  std::vector<frontend::PendingCheck> checks = frontend::take_checks();
  std::vector<Tensor> ts = wanted;
  for (auto& c : checks) ts.push_back(c.ok);
  bool lazy =
      std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return !frontend::is_buffer_node(*t.node()); });
  if (!lazy) return frontend::verify(checks);
  compute(ts);
  for (auto& t : ts) bind_to_buffer(t.impl_);
  frontend::verify(checks);
}

Device Tensor::device() const {
  const NodeRef& n = node();
  if (n->device >= 0) return Device::from_code(n->device);
  if (n->buffer) return n->buffer->device;
  return default_device();
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  const NodeRef& n = node();
  if (n->op == ir::Op::CONST && !n->buffer) return Tensor(ir::pinned_const(n, static_cast<int8_t>(d.code())));
  if (n->device < 0 && !n->buffer) {  // constant graphs: computed where they are wanted
    engine::realize({n}, d);
    // the constant node is shared (hash-consed) with graphs on other devices: take its buffer away
    std::shared_ptr<Buffer> b = n->buffer;
    ir::set_buffer(*n, nullptr);
    return Tensor(buffer_node(b, n->shape));
  }
  realize();
  return Tensor(buffer_node(node()->buffer->to(d), shape()));
}

const Tensor& Tensor::realize() const {
  kiln::realize({*this});
  return *this;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  realize();
  std::shared_ptr<const Buffer> hb = on_host(node()->buffer);
  const Buffer& b = *hb;
  std::vector<T> out;
  try {
    out.resize(static_cast<size_t>(b.numel));
  } catch (const std::bad_alloc&) {
    fail("to_vector", "out of host memory for " + std::to_string(b.numel) + " elements of " +
                          std::to_string(sizeof(T)) + " bytes (tensor of shape " + shape_str(shape()) + ")");
  }
  for (int64_t k = 0; k < b.numel; k++) {
    if constexpr (std::is_floating_point_v<T>)
      out[k] = static_cast<T>(b.get_f(k));
    else if (is_float(b.dtype))
      out[k] = static_cast<T>(b.get_f(k));
    else
      out[k] = static_cast<T>(b.get_i(k));
  }
  return out;
}

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    fail("item", "tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) +
                     " elements, item() needs exactly one");
  return to_vector<T>()[0];
}

#define KILN_READ(T)                                    \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
KILN_READ(float)
KILN_READ(double)
KILN_READ(int8_t)
KILN_READ(int16_t)
KILN_READ(int32_t)
KILN_READ(int64_t)
KILN_READ(uint8_t)
KILN_READ(uint16_t)
KILN_READ(uint32_t)
KILN_READ(uint64_t)
KILN_READ(bool)
#undef KILN_READ

Tensor Tensor::to(DType t) const { return Tensor(frontend::cast(node(), t)); }

Tensor Tensor::contiguous() const {
  if (node()->op == ir::Op::BUFFER) return *this;
  return Tensor(ir::make(ir::Op::CONTIGUOUS, dtype(), shape(), {node()}));
}

// --- printing, PyTorch style: one number format for the whole tensor, right-aligned ---
namespace {
std::vector<std::string> format_elements(const Buffer& b) {
  std::vector<std::string> out(static_cast<size_t>(b.numel));
  if (!is_float(b.dtype)) {
    for (int64_t k = 0; k < b.numel; k++)
      out[k] = b.dtype == DType::Bool ? (b.get_i(k) ? "True" : "False") : std::to_string(b.get_i(k));
    return out;
  }
  bool integral = true;
  double lo = INFINITY, hi = 0;
  for (int64_t k = 0; k < b.numel; k++) {
    double v = b.get_f(k);
    if (!std::isfinite(v)) continue;
    integral &= v == std::floor(v) && std::fabs(v) < 1e15;
    if (v != 0) lo = std::min(lo, std::fabs(v)), hi = std::max(hi, std::fabs(v));
  }
  bool sci = hi >= 1e8 || (lo < 1e-4 && lo > 0) || (integral && hi >= 1e15);
  char buf[64];
  for (int64_t k = 0; k < b.numel; k++) {
    double v = b.get_f(k);
    if (std::isnan(v))
      out[k] = "nan";
    else if (std::isinf(v))
      out[k] = v > 0 ? "inf" : "-inf";
    else if (sci)
      std::snprintf(buf, sizeof buf, "%.4e", v), out[k] = buf;
    else if (integral)
      std::snprintf(buf, sizeof buf, "%.0f.", v), out[k] = buf;
    else
      std::snprintf(buf, sizeof buf, "%.4f", v), out[k] = buf;
  }
  return out;
}

void print_rec(std::ostringstream& os, const std::vector<std::string>& el, size_t width, const Shape& s,
               size_t d, int64_t& k, int indent) {
  if (d == s.size()) {
    os << std::string(width - el[k].size(), ' ') << el[k];
    k++;
    return;
  }
  os << "[";
  for (int64_t i = 0; i < s[d]; i++) {
    if (i) {
      os << ",";
      if (d + 1 < s.size())
        os << std::string(s.size() - d - 1, '\n') << std::string(indent + d + 1, ' ');
      else
        os << " ";
    }
    print_rec(os, el, width, s, d + 1, k, indent);
  }
  os << "]";
}
}  // namespace

std::string Tensor::str() const {
  realize();
  std::vector<std::string> el = format_elements(*on_host(node()->buffer));
  size_t width = 0;
  for (auto& e : el) width = std::max(width, e.size());
  std::ostringstream os;
  os << "tensor(";
  int64_t k = 0;
  print_rec(os, el, width, shape(), 0, k, 7);
  if (dtype() != DType::F32 && dtype() != DType::I64 && dtype() != DType::Bool)
    os << ", dtype=" << to_string(dtype());
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// --- creation from host data ---
Tensor frontend::own_copy(const Tensor& t) {
  Tensor v = t.detach().contiguous();
  v.realize();
  const std::shared_ptr<Buffer>& b = v.node()->buffer;
  if (!b || b->numel != v.numel())
    throw Error("kiln: own_copy: the realized " + to_string(v.dtype()) + " tensor of shape " +
                shape_str(v.shape()) + " has no buffer of its size");
  return Tensor(buffer_node(b->to(b->device), v.shape()));
}

Tensor from_buffer(const void* data, Shape shape, DType dtype) {
  int64_t n = frontend::check_shape("tensor", shape);
  auto b = std::make_shared<Buffer>(dtype, n, default_device());
  upload(*b, data);
  return Tensor(buffer_node(b, shape));
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::I16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::U8;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return DType::U32;
  else
    return DType::U64;
}

template <class T>
Tensor tensor(const std::vector<T>& data, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(data.size())};  // like torch.tensor([...])
  // (a 0-d tensor comes from full({}, v))
  int64_t n = frontend::check_shape("tensor", shape);
  if (n != static_cast<int64_t>(data.size()))
    fail("tensor", std::to_string(data.size()) + " values do not fill shape " + shape_str(shape));
  return from_buffer(data.data(), shape, dtype_of<T>());
}
template Tensor tensor(const std::vector<float>&, Shape);
template Tensor tensor(const std::vector<double>&, Shape);
template Tensor tensor(const std::vector<int8_t>&, Shape);
template Tensor tensor(const std::vector<int16_t>&, Shape);
template Tensor tensor(const std::vector<int32_t>&, Shape);
template Tensor tensor(const std::vector<int64_t>&, Shape);
template Tensor tensor(const std::vector<uint8_t>&, Shape);
template Tensor tensor(const std::vector<uint32_t>&, Shape);
template Tensor tensor(const std::vector<uint64_t>&, Shape);

Tensor tensor(std::initializer_list<float> data, Shape shape) {
  return tensor(std::vector<float>(data), shape);
}

}  // namespace kiln
