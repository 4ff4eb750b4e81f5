// Random tensors from a counter-based generator: element i of a draw is a hash of (seed, offset + i),
// so a seed gives the same numbers on every device. rand, randn, randint, bernoulli, randperm, ...
#include "frontend/random.h"

#include <cmath>
#include <mutex>
#include <numbers>

#include "frontend/checks.h"
#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::check_shape;
using frontend::fail;
using frontend::place;
using ir::NodeRef;
using ir::Op;

namespace {

std::mutex& take_mutex() {
  static std::mutex m;
  return m;
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A 32-bit integer mix (xorshift-multiply rounds) applied to u32 tensors: same bits on every device.
Tensor shr(const Tensor& v, int s) {
  return Tensor(frontend::binary("rand", Op::SHR, v.node(), ir::const_int(s, DType::U32, v.shape())));
}
Tensor mulc(const Tensor& v, int64_t c) {
  return Tensor(frontend::binary("rand", Op::MUL, v.node(), ir::const_int(c, DType::U32, v.shape())));
}
Tensor mix32(Tensor x) {
  x = x ^ shr(x, 16);
  x = mulc(x, 0x7feb352d);
  x = x ^ shr(x, 15);
  x = mulc(x, 0x846ca68b);
  x = x ^ shr(x, 16);
  return x;
}

// The three words that key stream `k` of a draw at (seed, offset), as bits24 reads them. The xored
// constants keep seed 0 and offset 0 away from the mix's fixed point at 0.
std::vector<int64_t> key_words(uint64_t seed, uint64_t offset, int k) {
  uint64_t key = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(k) * 0xbf58476d1ce4e5b9ull;
  return {static_cast<int64_t>(offset & 0xffffffffull),
          static_cast<int64_t>((key ^ 0x9e3779b9ull) & 0xffffffffull),
          static_cast<int64_t>(((key >> 32) ^ (offset >> 32) ^ 0x85ebca6bull) & 0xffffffffull)};
}

// 24 random bits (u32 in [0, 2^24)) per element, from row `k` of a (streams, 3) i64 key tensor of
// key_words. The key is read from a buffer, not baked in as constants, so every draw of one shape
// runs the same compiled kernel (and a captured step can take the key as an input).
Tensor bits24(const Shape& s, const Tensor& key, int k) {
  Tensor idx = Tensor(ir::make(Op::IOTA, DType::I64, {numel_of(s)}, {}, {0})).reshape(s);
  auto word = [&](int64_t i, DType t) {
    return key.slice(0, k, k + 1).slice(1, i, i + 1).to(t).reshape({}).expand(s);
  };
  Tensor lo = (idx + word(0, DType::I64)).to(DType::U32) ^ word(1, DType::U32);
  Tensor h = mix32(mix32(lo) ^ word(2, DType::U32));
  return shr(h, 8);
}

Tensor key_tensor(uint64_t seed, uint64_t offset, int first, int streams, std::optional<Device> d) {
  std::vector<int64_t> words;
  for (int k = first; k < first + streams; k++) {
    auto w = key_words(seed, offset, k);
    words.insert(words.end(), w.begin(), w.end());
  }
  return place(tensor(words, {streams, 3}), d);  // on the device the draw is wanted on
}

Tensor bits24(const Shape& s, uint64_t seed, uint64_t offset, int k, std::optional<Device> d) {
  return bits24(s, key_tensor(seed, offset, k, 1, d), 0);
}

// uniform [0, 1) f32 with 24 random bits
Tensor uniform_bits(const Shape& s, uint64_t seed, uint64_t offset, int k, std::optional<Device> d) {
  return bits24(s, seed, offset, k, d).to(DType::F32) * (1.0 / 16777216.0);
}

// 48 random bits as i64 in [0, 2^48), from rows k and k+1 of a key tensor
Tensor bits48(const Shape& s, const Tensor& key, int k) {
  return bits24(s, key, k).to(DType::I64) * (int64_t{1} << 24) + bits24(s, key, k + 1).to(DType::I64);
}
Tensor bits48(const Shape& s, uint64_t seed, uint64_t offset, int k, std::optional<Device> d) {
  return bits48(s, key_tensor(seed, offset, k, 2, d), 0);
}

// uniform (0, 1] f64 with 48 random bits, from rows k and k+1 of a key tensor
Tensor uniform_open0(const Shape& s, const Tensor& key, int k) {
  return (bits48(s, key, k).to(DType::F64) + 1.0) * std::ldexp(1.0, -48);
}
Tensor uniform_open0(const Shape& s, uint64_t seed, uint64_t offset, int k, std::optional<Device> d) {
  return uniform_open0(s, key_tensor(seed, offset, k, 2, d), 0);
}

void need_float(const char* op, DType t) {
  if (!is_float(t)) fail(op, "needs a float dtype, got " + to_string(t));
}

}  // namespace

namespace frontend {

Tensor draw_key(Generator& g, int64_t n, int streams, std::optional<Device> d) {
  auto [seed, off] = g.take(n);
  return key_tensor(seed, off, 0, streams, d);
}

Tensor exponential(const Shape& s, const Tensor& key, int k) {
  Tensor rest =
      (kiln::full({}, Scalar((int64_t{1} << 48) - 1), DType::I64) - bits48(s, key, k)).to(DType::F32) *
      static_cast<float>(std::ldexp(1.0, -48));  // 1 - u
  return (rest * -1.0).log1p() * -1.0;
}

}  // namespace frontend

std::pair<uint64_t, uint64_t> Generator::take(int64_t n) {
  std::lock_guard lock(take_mutex());
  uint64_t off = offset_;
  offset_ += static_cast<uint64_t>(n);
  return {seed_, off};
}

uint64_t Generator::offset() const {
  std::lock_guard lock(take_mutex());
  return offset_;
}

void Generator::set_state(uint64_t seed, uint64_t offset) {
  std::lock_guard lock(take_mutex());
  seed_ = seed, offset_ = offset;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

Tensor rand(Shape s, Generator& g, TensorOptions o) {
  check_shape("rand", s);
  need_float("rand", o.dtype);
  auto [seed, off] = g.take(numel_of(s));
  return place(uniform_bits(s, seed, off, 0, o.device).to(o.dtype), o.device);
}
Tensor rand(Shape s, TensorOptions o) { return rand(std::move(s), default_generator(), o); }

Tensor randn(Shape s, Generator& g, TensorOptions o) {
  check_shape("randn", s);
  need_float("randn", o.dtype);
  auto [seed, off] = g.take(numel_of(s));
  // Box-Muller: u1 in (0, 1] so log is finite
  Tensor u1 = 1.0 - uniform_bits(s, seed, off, 1, o.device), u2 = uniform_bits(s, seed, off, 2, o.device);
  Tensor r = (u1.log() * -2.0).sqrt() * (u2 * (2 * std::numbers::pi)).cos();
  return place(r.to(o.dtype), o.device);
}
Tensor randn(Shape s, TensorOptions o) { return randn(std::move(s), default_generator(), o); }

Tensor rand_like(const Tensor& t) { return rand(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }

Tensor randint(int64_t low, int64_t high, Shape s, Generator& g, TensorOptions o) {
  check_shape("randint", s);
  if (high <= low)
    fail("randint", "needs low < high, got low=" + std::to_string(low) + " high=" + std::to_string(high));
  if (o.dtype == DType::Bool) fail("randint", "bool is not a valid dtype");
  auto [seed, off] = g.take(numel_of(s));
  // low + floor(u * (high - low)) with a 48-bit u: exact in f64, bias below 2^-48 * range
  double range = static_cast<double>(high) - static_cast<double>(low);
  Tensor u = bits48(s, seed, off, 0, o.device).to(DType::F64) * std::ldexp(1.0, -48);
  Tensor k = (u * range).trunc().to(DType::I64);
  k = minimum(k, full({}, Scalar(static_cast<long long>(high - low - 1)), DType::I64));
  return place((k + Scalar(static_cast<long long>(low))).to(o.dtype), o.device);
}
Tensor randint(int64_t low, int64_t high, Shape s, TensorOptions o) {
  return randint(low, high, std::move(s), default_generator(), o);
}

Tensor bernoulli(const Tensor& p, Generator& g) {
  if (!is_float(p.dtype()))
    fail("bernoulli", "probabilities must be a float tensor, got " + to_string(p.dtype()) + " of shape " +
                          shape_str(p.shape()));
  auto [seed, off] = g.take(p.numel());
  Tensor u = uniform_bits(p.shape(), seed, off, 0, p.device());
  DType t = promote_types(p.dtype(), DType::F32);
  return (u.to(t) < p.to(t)).to(p.dtype());
}
Tensor bernoulli(const Tensor& p) { return bernoulli(p, default_generator()); }

Tensor normal(double mean, double stdev, Shape s, TensorOptions o) {
  if (!(stdev >= 0)) fail("normal", "std must be >= 0, got " + std::to_string(stdev));
  need_float("normal", o.dtype);
  DType calc = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  return (randn(std::move(s), {.dtype = calc, .device = o.device}) * stdev + mean).to(o.dtype);
}

Tensor uniform(double low, double high, Shape s, TensorOptions o) {
  if (!(low <= high))
    fail("uniform", "needs low <= high, got low=" + std::to_string(low) + " high=" + std::to_string(high));
  need_float("uniform", o.dtype);
  DType calc = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  return (rand(std::move(s), {.dtype = calc, .device = o.device}) * (high - low) + low).to(o.dtype);
}

Tensor randperm(int64_t n, Generator& g, TensorOptions o) {
  if (n < 0) fail("randperm", "n must be >= 0, got " + std::to_string(n));
  if (o.dtype == DType::Bool) fail("randperm", "bool is not a valid dtype");
  auto [seed, off] = g.take(n);
  // the rank of each of n random keys (ties broken by position) is a uniform random permutation
  Tensor key = bits48({n}, seed, off, 0, o.device);
  Tensor idx = arange(n);
  Tensor ki = key.unsqueeze(1), kj = key.unsqueeze(0);
  Tensor before = (kj < ki) | ((kj == ki) & (idx.unsqueeze(0) < idx.unsqueeze(1)));
  return place(before.to(DType::I64).sum(1).to(o.dtype), o.device);
}
Tensor randperm(int64_t n, TensorOptions o) { return randperm(n, default_generator(), o); }

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& g) {
  if (probs.dim() != 1 && probs.dim() != 2)
    fail("multinomial", "probabilities must be 1-D or 2-D, got shape " + shape_str(probs.shape()));
  if (!is_float(probs.dtype()))
    fail("multinomial", "probabilities must be a float tensor, got " + to_string(probs.dtype()));
  int64_t k = probs.size(-1);
  if (k == 0) fail("multinomial", "needs at least one category, got shape " + shape_str(probs.shape()));
  if (num_samples <= 0) fail("multinomial", "num_samples must be > 0, got " + std::to_string(num_samples));
  if (!replacement && num_samples > k)
    fail("multinomial", "cannot draw " + std::to_string(num_samples) + " samples from " + std::to_string(k) +
                            " categories without replacement");
  Tensor p = (probs.dim() == 1 ? probs.unsqueeze(0) : probs).to(DType::F64);
  int64_t rows = p.size(0);
  frontend::require(((p >= 0.0) & (p < INFINITY)).all() & (p.sum(1) > 0.0).all(),
                    "multinomial: probabilities " + shape_str(probs.shape()) + " " +
                        to_string(probs.dtype()) + " on " + probs.device().str() +
                        " must be finite and >= 0, with a positive sum in every row");
  Tensor cat = arange(k);
  Tensor out;
  if (replacement) {
    // inverse CDF: cdf[c] = sum_{j <= c} p[j]; a sample is the number of cdf entries <= u * total
    auto [seed, off] = g.take(rows * num_samples);
    Tensor le = cat.unsqueeze(0) <= cat.unsqueeze(1);                 // (k: c, k: j)
    Tensor cdf = where(le.unsqueeze(0), p.unsqueeze(1), 0.0).sum(2);  // (rows, k)
    Tensor total = cdf.slice(1, k - 1, k);                            // (rows, 1)
    Tensor u =
        (1.0 - uniform_open0({rows, num_samples}, seed, off, 0, probs.device())) * total;  // [0, total)
    Tensor below = cdf.unsqueeze(1) <= u.unsqueeze(2);                                     // (rows, n, k)
    out = minimum(below.to(DType::I64).sum(2), full({}, Scalar(static_cast<long long>(k - 1)), DType::I64));
  } else {
    // exponential race: key = E / p with E ~ Exp(1); the categories in increasing key order are
    // draws without replacement in order
    auto [seed, off] = g.take(rows * k);
    Tensor e = uniform_open0({rows, k}, seed, off, 0, probs.device()).log() * -1.0;
    Tensor key = where(p > 0.0, e / p, INFINITY);  // p == 0: drawn last (also when E == 0)
    if (num_samples == 1) {  // the smallest key (the first of ties): O(k), where ranking is O(k^2)
      out = key.argmin(1, true);
      return probs.dim() == 1 ? out.squeeze(0) : out;
    }
    Tensor ki = key.unsqueeze(2), kj = key.unsqueeze(1);
    Tensor before = (kj < ki) | ((kj == ki) & (cat.unsqueeze(0) < cat.unsqueeze(1)).unsqueeze(0));
    Tensor rank = before.to(DType::I64).sum(2);  // (rows, k)
    Tensor pos = arange(num_samples).unsqueeze(1);
    Tensor hit = rank.unsqueeze(1) == pos.unsqueeze(0);  // (rows, n, k)
    out = where(hit, cat.unsqueeze(0).unsqueeze(0), Scalar(0)).sum(2);
  }
  return probs.dim() == 1 ? out.squeeze(0) : out;
}
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  return multinomial(probs, num_samples, replacement, default_generator());
}

}  // namespace kiln
