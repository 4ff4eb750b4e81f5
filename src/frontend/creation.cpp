// Tensor creation: constants, ranges, eye, and the counter-based random number generator.
#include <atomic>
#include <cmath>
#include <numbers>

#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::fail;
using ir::NodeRef;
using ir::Op;

namespace {
void check_shape(const char* op, const Shape& s) {
  for (auto d : s)
    if (d < 0) fail(op, "negative dimension in shape " + shape_str(s));
}
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
Tensor zeros(Shape s, TensorOptions o) { return full(std::move(s), 0.0, o.dtype); }
Tensor ones(Shape s, TensorOptions o) { return full(std::move(s), 1.0, o.dtype); }
Tensor zeros_like(const Tensor& t) { return full(t.shape(), 0.0, t.dtype()); }
Tensor ones_like(const Tensor& t) { return full(t.shape(), 1.0, t.dtype()); }
Tensor full_like(const Tensor& t, Scalar v) { return full(t.shape(), v, t.dtype()); }

Tensor arange(int64_t end, TensorOptions o) {
  if (end < 0) fail("arange", "end must be >= 0, got " + std::to_string(end));
  return Tensor(iota({end}, 0, o.dtype));
}

Tensor arange(double start, double end, double step, std::optional<DType> dtype) {
  if (step == 0) fail("arange", "step must be nonzero");
  double n = std::ceil((end - start) / step);
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
  return (r == c).to(o.dtype);
}

// --- counter-based RNG: element i of a draw with (seed, offset) is hash(seed, offset + i) ---
namespace {
struct Generator {
  std::atomic<uint64_t> seed{0x5eed}, offset{0};
};
Generator& gen() {
  static Generator g;
  return g;
}

// A 32-bit integer mix (xorshift-multiply rounds) applied to u32 tensors: same bits on every device.
Tensor mix32(Tensor x) {
  auto shr = [](const Tensor& v, int s) {
    return Tensor(frontend::binary("rand", Op::SHR, v.node(), ir::const_int(s, DType::U32, v.shape())));
  };
  auto mulc = [](const Tensor& v, int64_t c) {
    return Tensor(frontend::binary("rand", Op::MUL, v.node(), ir::const_int(c, DType::U32, v.shape())));
  };
  x = x ^ shr(x, 16);
  x = mulc(x, 0x7feb352d);
  x = x ^ shr(x, 15);
  x = mulc(x, 0x846ca68b);
  x = x ^ shr(x, 16);
  return x;
}

// uniform [0, 1) floats with 24 random bits, stream `k` of a draw
Tensor uniform_bits(const Shape& s, uint64_t seed, uint64_t offset, int k) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  Tensor idx = Tensor(iota({n}, 0, DType::I64)).reshape(s);
  uint64_t key = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(k) * 0xbf58476d1ce4e5b9ull;
  Tensor lo = ((idx + static_cast<long long>(offset & 0xffffffffull)).to(DType::U32)) ^
              full(s, static_cast<long long>(key & 0xffffffffull), DType::U32);
  Tensor h = mix32(mix32(lo) ^ full(s, static_cast<long long>((key >> 32) ^ (offset >> 32)), DType::U32));
  Tensor top = Tensor(frontend::binary("rand", Op::SHR, h.node(), ir::const_int(8, DType::U32, s)));
  return top.to(DType::F32) * (1.0 / 16777216.0);
}

std::pair<uint64_t, uint64_t> take(int64_t n) {
  uint64_t off = gen().offset.fetch_add(static_cast<uint64_t>(n));
  return {gen().seed.load(), off};
}
}  // namespace

void manual_seed(uint64_t seed) {
  gen().seed = seed;
  gen().offset = 0;
}

Tensor rand(Shape s, TensorOptions o) {
  check_shape("rand", s);
  if (!is_float(o.dtype)) fail("rand", "needs a float dtype, got " + to_string(o.dtype));
  int64_t n = 1;
  for (auto d : s) n *= d;
  auto [seed, off] = take(n);
  return uniform_bits(s, seed, off, 0).to(o.dtype);
}

Tensor randn(Shape s, TensorOptions o) {
  check_shape("randn", s);
  if (!is_float(o.dtype)) fail("randn", "needs a float dtype, got " + to_string(o.dtype));
  int64_t n = 1;
  for (auto d : s) n *= d;
  auto [seed, off] = take(n);
  // Box-Muller: u1 in (0, 1] so log is finite
  Tensor u1 = 1.0 - uniform_bits(s, seed, off, 1), u2 = uniform_bits(s, seed, off, 2);
  Tensor r = (u1.log() * -2.0).sqrt() * (u2 * (2 * std::numbers::pi)).cos();
  return r.to(o.dtype);
}

Tensor rand_like(const Tensor& t) { return rand(t.shape(), {.dtype = t.dtype()}); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), {.dtype = t.dtype()}); }

}  // namespace kiln
