// kiln::Tensor: a lazy tensor with a PyTorch-like API. Ops build a graph; realize() (or reading
// values) schedules, fuses, compiles and runs it.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

namespace ir {
struct Node;
}

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3)"

// A number given where a tensor could be: keeps whether it was bool, integral or floating, for
// PyTorch's promotion rules (an int tensor + 1 stays int, + 1.5 becomes float).
struct Scalar {
  enum class Kind { Bool, Int, Float } kind;
  double v;       // the value (all kinds)
  int64_t i = 0;  // the exact value of Bool and Int scalars
  Scalar(bool b) : kind(Kind::Bool), v(b), i(b) {}
  Scalar(int x) : kind(Kind::Int), v(x), i(x) {}
  Scalar(long x) : kind(Kind::Int), v(static_cast<double>(x)), i(x) {}
  Scalar(long long x) : kind(Kind::Int), v(static_cast<double>(x)), i(x) {}
  Scalar(unsigned x) : kind(Kind::Int), v(x), i(x) {}
  Scalar(float x) : kind(Kind::Float), v(x) {}
  Scalar(double x) : kind(Kind::Float), v(x) {}
};

struct TensorOptions {
  DType dtype = kDefaultFloat;
  Device device = Device::cpu();
};

// x.index({Slice(1, 3), 0, Slice()}) is x[1:3, 0, :]
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice() = default;
  Slice(std::optional<int64_t> start_, std::optional<int64_t> stop_, int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};
using TensorIndex = std::variant<int64_t, Slice>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const ir::Node> node);

  // --- properties ---
  const Shape& shape() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const { return Device::cpu(); }
  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<const ir::Node>& node() const;

  // --- realization and reading ---
  const Tensor& realize() const;
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;
  std::string str() const;  // PyTorch-like printing
  Tensor to(DType t) const;

  // --- elementwise ---
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor trunc() const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;

  // --- reductions (dims may be negative; empty dims = all) ---
  Tensor sum(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor sum(int64_t d, bool keepdim = false) const { return sum(std::vector<int64_t>{d}, keepdim); }
  Tensor max(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor max(int64_t d, bool keepdim = false) const { return max(std::vector<int64_t>{d}, keepdim); }
  Tensor min(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor min(int64_t d, bool keepdim = false) const { return min(std::vector<int64_t>{d}, keepdim); }
  Tensor prod(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor prod(int64_t d, bool keepdim = false) const { return prod(std::vector<int64_t>{d}, keepdim); }
  Tensor mean(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor mean(int64_t d, bool keepdim = false) const { return mean(std::vector<int64_t>{d}, keepdim); }
  Tensor softmax(int64_t d) const;

  // --- movement (views: no copies) ---
  Tensor reshape(Shape s) const;  // one -1 allowed
  Tensor view(Shape s) const { return reshape(std::move(s)); }
  Tensor permute(std::vector<int64_t> perm) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor expand(Shape s) const;  // -1 keeps a dim
  Tensor broadcast_to(Shape s) const { return expand(std::move(s)); }
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  Tensor squeeze() const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  // pad: pairs (before, after) from the last dim backwards, as torch.nn.functional.pad
  Tensor pad(std::vector<int64_t> pads, double value = 0) const;
  Tensor slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor index(std::vector<TensorIndex> idx) const;
  Tensor flip(std::vector<int64_t> dims) const;
  Tensor contiguous() const;

  // --- linear algebra (multiply + sum) ---
  Tensor dot(const Tensor& o) const;
  Tensor matmul(const Tensor& o) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// --- arithmetic operators (tensor-tensor broadcast; tensor-scalar) ---
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator&(const Tensor& a, const Tensor& b);  // bitwise / logical on bool
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

// --- creation ---
template <class T>
Tensor tensor(const std::vector<T>& data, Shape shape = {});
Tensor tensor(std::initializer_list<float> data, Shape shape = {});
Tensor from_buffer(const void* data, Shape shape, DType dtype);  // copies
Tensor zeros(Shape s, TensorOptions o = {});
Tensor ones(Shape s, TensorOptions o = {});
Tensor full(Shape s, Scalar v, std::optional<DType> dtype = std::nullopt);
Tensor arange(int64_t end, TensorOptions o = {.dtype = DType::I64});
Tensor arange(double start, double end, double step = 1, std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions o = {});
// Counter-based RNG: value i of a draw is a hash of (seed, draw offset + i), so the same seed gives
// the same numbers on every device. manual_seed resets the global generator.
void manual_seed(uint64_t seed);
Tensor rand(Shape s, TensorOptions o = {});
Tensor randn(Shape s, TensorOptions o = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar v);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

// Realizes several tensors in one schedule (shared work is computed once).
void realize(const std::vector<Tensor>& ts);

}  // namespace kiln
