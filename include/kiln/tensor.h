// kiln::Tensor: a lazy tensor with a PyTorch-like API. Ops build a graph; realize() (or reading
// values) schedules, fuses, compiles and runs it. A result whose lazy graph would be more than 1000
// ops deep (a loss summed over many steps) is realized when it is made.
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

// A symbolic dimension: a size with a name and bounds. A dim marked with it (Tensor::symbolic)
// takes its size as the variable's value in each call, and the kernels that loop over it compile
// once for every value in [min, max] (a last, shorter batch or a growing sequence compiles nothing).
class Var {
 public:
  Var(std::string name, int64_t min, int64_t max);
  const std::string& name() const { return name_; }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }

 private:
  std::string name_;
  int64_t min_, max_;
};

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
  std::optional<Device> device = std::nullopt;  // none: the default device (KILN_DEVICE)
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
  // The device of the buffers this tensor reads; a tensor of constants (zeros, arange) is computed
  // on the default device.
  Device device() const;
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
  // A copy on device d (this tensor if it is there already). Realizes; no gradient flows through.
  Tensor to(Device d) const;

  // --- autograd (src/frontend/autograd.cpp) ---
  // Marks a leaf tensor as needing gradients (realizes it: leaves are buffers).
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;  // a leaf marked so, or computed from one outside a NoGradGuard
  bool is_leaf() const;
  Tensor grad() const;  // accumulated gradient (lazy); undefined before backward()
  void set_grad(const Tensor& g);
  void zero_grad();  // drops the gradient
  // Accumulates d(this)/d(leaf) into every leaf's grad(); grad_output defaults to 1 for scalars.
  void backward(std::optional<Tensor> grad_output = std::nullopt) const;
  Tensor detach() const;  // same values, no gradient flows through
  // In-place update: this tensor, and every handle that shares it, now holds `value` (cast to this
  // dtype; shapes must match). Lazy like every op: an optimizer assigns all parameters and realizes
  // them together, so forward, backward and update compile as one schedule. A leaf stays a leaf;
  // no gradient flows through the assignment.
  Tensor& assign_(const Tensor& value);

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
  // (src/frontend/math.cpp)
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  // half to even, as torch.round
  Tensor sign() const;
  Tensor square() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  Tensor clamp(const Tensor& min, const Tensor& max) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor lerp(const Tensor& end, double weight) const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor atan2(const Tensor& other) const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor softplus(double beta = 1, double threshold = 20) const;
  Tensor silu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor elu(double alpha = 1) const;
  Tensor selu() const;
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor hardtanh(double min = -1, double max = 1) const;
  Tensor relu6() const;
  Tensor logsigmoid() const;
  Tensor mish() const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;

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
  // (src/frontend/reduce_more.cpp)
  Tensor log_softmax(int64_t d) const;
  Tensor var(std::vector<int64_t> dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(std::vector<int64_t> dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor logsumexp(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor norm(double p = 2, std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor all(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor any(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> d = std::nullopt, bool keepdim = false) const;  // first max
  Tensor argmin(std::optional<int64_t> d = std::nullopt, bool keepdim = false) const;
  std::pair<Tensor, Tensor> max_with_indices(int64_t d, bool keepdim = false) const;  // torch.max(x, dim)
  std::pair<Tensor, Tensor> min_with_indices(int64_t d, bool keepdim = false) const;
  Tensor cumsum(int64_t d) const;
  Tensor cumprod(int64_t d) const;

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
  // The same values with dim d standing for v (src/frontend/symbolic.cpp): its size is v's value
  // in this call, which must lie in v's bounds; what is computed from it keeps the dim symbolic.
  Tensor symbolic(int64_t d, const Var& v) const;
  // The variable dim d stands for alone (a dim marked symbolic, or kept so), if any.
  std::optional<Var> var_of(int64_t d) const;
  // (src/frontend/indexing.cpp) index tensors are integer; out-of-range indices read 0, never
  // out of bounds (KILN_VALIDATE=1 reports them)
  Tensor gather(int64_t d, const Tensor& index) const;
  Tensor scatter(int64_t d, const Tensor& index, const Tensor& src) const;
  Tensor scatter_add(int64_t d, const Tensor& index, const Tensor& src) const;
  Tensor index_select(int64_t d, const Tensor& index) const;
  Tensor index_add(int64_t d, const Tensor& index, const Tensor& src, double alpha = 1) const;
  // self with slices replaced: self[.., index[t], ..] = source[.., t, ..] along d, for each t of the
  // 0-D or 1-D integer index (source: self's dtype and shape, index.numel() along d). An index
  // outside [0, size(d)) writes nothing; of duplicate indices one write wins, which is unspecified.
  // index_copy_ updates this tensor: its kernel stores only the new slices, into the old value's
  // buffer where nothing else reads that value (no other handle or lazy graph), else into a new
  // buffer (src/frontend/index_copy.cpp).
  Tensor index_copy(int64_t d, const Tensor& index, const Tensor& source) const;
  Tensor& index_copy_(int64_t d, const Tensor& index, const Tensor& source);
  Tensor take_along_dim(const Tensor& index, int64_t d) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t d = -1, bool largest = true) const;  // values, indices
  std::pair<Tensor, Tensor> sort(int64_t d = -1, bool descending = false) const;
  Tensor argsort(int64_t d = -1, bool descending = false) const;
  // (src/frontend/shape.cpp)
  std::vector<Tensor> split(int64_t size, int64_t d = 0) const;
  std::vector<Tensor> split(std::vector<int64_t> sizes, int64_t d = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t d = 0) const;
  std::vector<Tensor> unbind(int64_t d = 0) const;
  Tensor unflatten(int64_t d, Shape sizes) const;
  Tensor repeat(std::vector<int64_t> times) const;
  Tensor tile(std::vector<int64_t> times) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> d = std::nullopt) const;
  Tensor roll(std::vector<int64_t> shifts, std::vector<int64_t> dims) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  // mode: "constant" (value), "reflect", "replicate"; pads as in pad()
  Tensor pad(std::vector<int64_t> pads, const std::string& mode, double value = 0) const;

  // --- linear algebra (multiply + sum) ---
  Tensor dot(const Tensor& o) const;
  Tensor matmul(const Tensor& o) const;

  struct Impl;  // internal state (src/frontend/tensor_impl.h)
  friend void realize(const std::vector<Tensor>& ts);
  friend class Jit;

 private:
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
// shape ops over several tensors (src/frontend/shape.cpp)
Tensor cat(const std::vector<Tensor>& ts, int64_t d = 0);
Tensor stack(const std::vector<Tensor>& ts, int64_t d = 0);
Tensor vstack(const std::vector<Tensor>& ts);
Tensor hstack(const std::vector<Tensor>& ts);
Tensor einsum(const std::string& equation, const std::vector<Tensor>& ts);
Tensor one_hot(const Tensor& index, int64_t num_classes);  // i64 result, like torch
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
// A generator with its own seed and draw counter; the global one is used when none is given.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed, offset_ = 0; }
  uint64_t seed() const { return seed_; }
  std::pair<uint64_t, uint64_t> take(int64_t n);  // (seed, offset) of a draw of n numbers
  // The draw counter, and restoring both (e.g. from a checkpoint): the next draw continues there.
  uint64_t offset() const;
  void set_state(uint64_t seed, uint64_t offset);

 private:
  uint64_t seed_, offset_ = 0;
};
Generator& default_generator();
// (src/frontend/random.cpp)
Tensor rand(Shape s, Generator& g, TensorOptions o = {});
Tensor randn(Shape s, Generator& g, TensorOptions o = {});
Tensor randint(int64_t low, int64_t high, Shape s, TensorOptions o = {.dtype = DType::I64});
Tensor randint(int64_t low, int64_t high, Shape s, Generator& g, TensorOptions o = {.dtype = DType::I64});
Tensor bernoulli(const Tensor& p);  // 0/1 of p's dtype
Tensor bernoulli(const Tensor& p, Generator& g);
Tensor normal(double mean, double stdev, Shape s, TensorOptions o = {});
Tensor uniform(double low, double high, Shape s, TensorOptions o = {});
Tensor randperm(int64_t n, TensorOptions o = {.dtype = DType::I64});
Tensor randperm(int64_t n, Generator& g, TensorOptions o = {.dtype = DType::I64});
// samples per row of (unnormalized, nonnegative) probabilities; i64 indices
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& g);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar v);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

// Realizes several tensors in one schedule (shared work is computed once).
void realize(const std::vector<Tensor>& ts);

// --- autograd ---
// Gradients of sum(outputs[i] * grad_outputs[i]) with respect to each input, as lazy tensors whose
// graphs can be differentiated again (higher-order gradients). grad_outputs default to ones for
// scalar outputs. An input the outputs do not depend on gets zeros, unless allow_unused is false.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool allow_unused = true);
// While one exists (per thread), new results do not require gradients.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
bool grad_enabled();

}  // namespace kiln
