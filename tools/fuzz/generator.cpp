// kiln_fuzz's graph generator: proposes random ops over earlier nodes, evaluates each with the
// reference interpreter and keeps it only when its result is tame and its error bound is small.
#include "generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "engine/interpreter.h"

namespace kiln::fuzz {

double smallest_normal(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-1022;
    case DType::F32:
    case DType::BF16: return 0x1p-126;
    case DType::F16: return 0x1p-14;
    default: return 0;
  }
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-53;
    case DType::F32: return 0x1p-24;
    case DType::F16: return 0x1p-11;
    case DType::BF16: return 0x1p-8;
    default: return 0;
  }
}

namespace {

constexpr int64_t kMaxNumel = 2048;
constexpr double kMaxFloat = 1e4;      // larger values are rejected (exp overflow, f16 range)
constexpr double kMaxInt = 1e6;        // keeps integer arithmetic far from overflow
constexpr double kTranscendental = 8;  // ulps of slack for exp2/log2 and the ops built on them
constexpr double kSafety = 4;          // margins must exceed this many error bounds
constexpr double kKink = 1e-3;         // gradient graphs keep kinks and comparisons this far away

// What the generator knows about a node: its exact value and summary numbers of it.
struct Fact {
  ref::Array val;
  double max_abs = 0, min_abs = 0;
};

Fact fact_of(ref::Array a) {
  Fact f;
  f.min_abs = a.numel() ? std::numeric_limits<double>::infinity() : 0;
  for (int64_t k = 0; k < a.numel(); k++) {
    double v = std::fabs(a.at(k));
    f.max_abs = std::max(f.max_abs, v);
    f.min_abs = std::min(f.min_abs, v);
  }
  f.val = std::move(a);
  return f;
}

double min_of(const ref::Array& a) {
  double m = std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < a.numel(); k++) m = std::min(m, a.at(k));
  return m;
}

int64_t numel_of(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); k++) {
    int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[k] = std::max(x, y);
  }
  return out;
}

bool is_numeric(DType t) { return t != DType::Bool; }

Node op_node(Op op, std::vector<int> args, double scalar = 0) {
  Node n;
  n.op = op;
  n.args = std::move(args);
  n.scalar = scalar;
  return n;
}

class Generator {
 public:
  Generator(uint64_t seed, double grad_fraction) : rng_(seed) { g_.grad = real(0, 1) < grad_fraction; }

  Generated run() {
    add_input(random_shape(3), pick_float_dtype());
    int ops = uniform(1, 12);
    for (int tries = 0; ops > 0 && tries < 300 && error_.empty(); tries++)
      if (propose()) ops--;
    if (error_.empty()) choose_outputs();
    return {std::move(g_), error_};
  }

 private:
  std::mt19937_64 rng_;
  Graph g_;
  std::vector<Tensor> t_;
  std::vector<Fact> f_;
  std::string error_;

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return real(0, 1) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }

  int size() const { return static_cast<int>(g_.nodes.size()); }
  DType dtype(int i) const { return t_[i].dtype(); }
  const Shape& shape(int i) const { return t_[i].shape(); }
  int64_t rank(int i) const { return static_cast<int64_t>(shape(i).size()); }
  double err(int i) const { return g_.nodes[i].err; }

  DType pick_float_dtype() { return chance(0.15) ? DType::F64 : DType::F32; }

  Shape random_shape(int max_rank) {
    Shape s(static_cast<size_t>(chance(0.08) ? 0 : uniform(1, max_rank)));
    for (auto& d : s) d = chance(0.25) ? 1 : uniform(2, 7);
    return s;
  }

  // A recent node is likelier: graphs grow as chains with shared side branches.
  int pick_node(bool (*ok)(DType)) {
    std::vector<int> c;
    for (int i = 0; i < size(); i++)
      if (ok(dtype(i))) c.push_back(i);
    if (c.empty()) return -1;
    if (chance(0.5)) return c.back();
    return pick(c);
  }
  static bool any_numeric(DType t) { return is_numeric(t); }
  static bool any_float(DType t) { return is_float(t); }
  static bool any_bool(DType t) { return t == DType::Bool; }

  int add_input(Shape s, DType t) {
    Node n;
    n.op = Op::Input;
    n.ints = s;
    n.dtype = t;
    // some inputs hold few distinct values, so ties and exact equalities happen
    bool coarse = !g_.grad && chance(0.15);
    for (int64_t k = 0; k < numel_of(s); k++) {
      double v = coarse ? uniform(-4, 4) * 0.5 : real(-2, 2);
      n.values.push_back(t == DType::F64 ? v : static_cast<double>(static_cast<float>(v)));
    }
    g_.nodes.push_back(n);
    t_.push_back(make_input(n));
    f_.push_back(fact_of(ref::evaluate(t_.back().node(), false)));
    return size() - 1;
  }

  // A node broadcastable against `s`: an earlier one, or a new input of a shape made from s.
  int partner(const Shape& s, bool float_only) {
    std::vector<int> c;
    for (int i = 0; i < size(); i++) {
      if (!is_numeric(dtype(i)) || (float_only && !is_float(dtype(i)))) continue;
      auto b = broadcast(s, shape(i));
      if (b && numel_of(*b) <= kMaxNumel) c.push_back(i);
    }
    if (!c.empty() && chance(0.6)) return pick(c);
    Shape p(s.begin() + uniform(0, static_cast<int>(s.size())), s.end());
    for (auto& d : p)
      if (chance(0.3)) d = 1;
    return add_input(p, pick_float_dtype());
  }

  // A float node whose values stay at least 0.25 from zero: a itself, or |a| + 0.5 (a*a + 0.5 in
  // gradient graphs, which must stay smooth).
  int away_from_zero(int a, bool positive) {
    if (is_float(dtype(a)) && f_[a].min_abs >= 0.25 && (!positive || min_of(f_[a].val) >= 0.25)) return a;
    if (!is_float(dtype(a))) return -1;
    int s = g_.grad ? add(op_node(Op::Mul, {a, a})) : add(op_node(Op::Abs, {a}));
    return s < 0 ? -1 : add(op_node(Op::AddScalar, {s}, 0.5));
  }

  std::vector<int64_t> random_axes(int64_t r) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < r; d++)
      if (chance(0.5)) axes.push_back(chance(0.3) ? d - r : d);
    return axes;  // empty: all
  }

  Shape random_reshape(int64_t n) {
    std::vector<int64_t> primes;
    for (int64_t p = 2; n > 1; p++)
      while (n % p == 0) primes.push_back(p), n /= p;
    Shape s(static_cast<size_t>(uniform(1, 4)), 1);
    for (int64_t p : primes) s[static_cast<size_t>(uniform(0, static_cast<int>(s.size()) - 1))] *= p;
    return s;
  }

  bool propose();
  int add(Node n);
  double error_bound(const Node& n, const Fact& out, DType out_dtype);
  double margin(const Node& n);
  void choose_outputs();
};

enum class Kind { Unary, Positive, Scalar, Binary, Div, Compare, Where, Reduce, Move, Cat, Matmul, Cast };

bool Generator::propose() {
  static const std::vector<std::pair<Kind, int>> weights = {
      {Kind::Unary, 12}, {Kind::Positive, 4}, {Kind::Scalar, 4}, {Kind::Binary, 14},
      {Kind::Div, 3},    {Kind::Compare, 4},  {Kind::Where, 4},  {Kind::Reduce, 8},
      {Kind::Move, 16},  {Kind::Cat, 4},      {Kind::Matmul, 4}, {Kind::Cast, 5}};
  int total = 0;
  for (auto& [k, w] : weights) total += w;
  int r = uniform(0, total - 1);
  Kind kind = Kind::Unary;
  for (auto& [k, w] : weights)
    if ((r -= w) < 0) {
      kind = k;
      break;
    }
  int a = pick_node(any_numeric);
  if (a < 0) return false;
  Node n;
  n.args = {a};
  switch (kind) {
    case Kind::Unary:
      n.op = pick(std::vector<Op>{Op::Neg, Op::Exp, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Abs});
      if (n.op == Op::Exp && (!is_float(dtype(a)) || f_[a].max_abs > 6)) return false;
      break;
    case Kind::Positive:
      n.op = chance(0.5) ? Op::Log : Op::Sqrt;
      if ((n.args[0] = away_from_zero(a, true)) < 0) return false;
      break;
    case Kind::Scalar:
      if (!is_float(dtype(a))) return false;
      n.op = chance(0.5) ? Op::AddScalar : Op::MulScalar;
      n.scalar = pick(std::vector<double>{0.5, -1.5, 2, 0.25, -3, 1.75});
      break;
    case Kind::Binary:
      n.op = pick(std::vector<Op>{Op::Add, Op::Sub, Op::Mul, Op::Maximum, Op::Minimum});
      n.args.push_back(partner(shape(a), g_.grad));
      break;
    case Kind::Div: {
      n.op = Op::Div;
      int b = away_from_zero(partner(shape(a), true), false);
      if (b < 0) return false;
      n.args.push_back(b);
      break;
    }
    case Kind::Compare:
      n.op = pick(std::vector<Op>{Op::Less, Op::Greater, Op::Equal});
      n.args.push_back(partner(shape(a), g_.grad));
      break;
    case Kind::Where: {
      int c = pick_node(any_bool);
      if (c < 0) return false;
      int x = partner(shape(c), g_.grad);
      auto s = broadcast(shape(c), shape(x));
      n.op = Op::Where;
      n.args = {c, x, partner(*s, g_.grad)};
      break;
    }
    case Kind::Reduce:
      n.op = pick(std::vector<Op>{Op::Sum, Op::Max, Op::Mean});
      n.ints = random_axes(rank(a));
      n.keepdim = chance(0.4);
      break;
    case Kind::Move: {
      n.op = pick(std::vector<Op>{Op::Reshape, Op::Permute, Op::Pad, Op::Flip, Op::Slice, Op::Expand});
      int64_t r = rank(a);
      const Shape& s = shape(a);
      if (r == 0 && n.op != Op::Reshape && n.op != Op::Expand) return false;
      if (n.op == Op::Reshape) {
        n.ints = random_reshape(numel_of(s));
        if (chance(0.3)) n.ints[static_cast<size_t>(uniform(0, static_cast<int>(n.ints.size()) - 1))] = -1;
      } else if (n.op == Op::Permute) {
        n.ints.resize(static_cast<size_t>(r));
        std::iota(n.ints.begin(), n.ints.end(), 0);
        std::shuffle(n.ints.begin(), n.ints.end(), rng_);
      } else if (n.op == Op::Pad) {
        int64_t dims = uniform(1, static_cast<int>(std::min<int64_t>(r, 3)));
        for (int64_t k = 0; k < 2 * dims; k++) n.ints.push_back(uniform(0, 2));
        n.scalar = chance(0.6) ? 0 : pick(std::vector<double>{1, -0.5, 2.5});
      } else if (n.op == Op::Flip) {
        for (int64_t d = 0; d < r; d++)
          if (chance(0.5)) n.ints.push_back(d);
        if (n.ints.empty()) n.ints.push_back(uniform(0, static_cast<int>(r) - 1));
      } else if (n.op == Op::Slice) {
        int64_t d = uniform(0, static_cast<int>(r) - 1);
        int start = uniform(0, static_cast<int>(s[d]) - 1);
        n.ints = {d, start, uniform(start + 1, static_cast<int>(s[d])), uniform(1, 3)};
      } else {  // Expand: size-1 dims grow, and maybe a new leading dim
        n.ints = s;
        for (auto& d : n.ints)
          if (d == 1 && chance(0.7)) d = uniform(2, 5);
        if (n.ints == s || chance(0.3)) n.ints.insert(n.ints.begin(), uniform(2, 4));
      }
      break;
    }
    case Kind::Cat: {
      if (rank(a) == 0) return false;
      n.op = Op::Cat;
      int64_t d = uniform(0, static_cast<int>(rank(a)) - 1);
      std::vector<int> c = {a};
      for (int i = 0; i < size(); i++) {
        if (dtype(i) != dtype(a) || rank(i) != rank(a)) continue;
        Shape x = shape(i), y = shape(a);
        x[d] = y[d] = 0;
        if (x == y) c.push_back(i);
      }
      int b = pick(c);
      if (b == a && chance(0.5) && is_float(dtype(a))) {
        Shape s = shape(a);
        s[d] = uniform(1, 4);
        b = add_input(s, dtype(a));
      }
      n.args.push_back(b);
      n.ints = {d};
      break;
    }
    case Kind::Matmul: {
      if (!is_float(dtype(a)) || rank(a) == 0) return false;
      n.op = Op::Matmul;
      int64_t k = shape(a).back();
      Shape s = {k};
      if (chance(0.75)) s.push_back(uniform(1, 7));
      if (rank(a) >= 3 && s.size() == 2 && chance(0.5)) s.insert(s.begin(), shape(a)[rank(a) - 3]);
      n.args.push_back(add_input(s, pick_float_dtype()));
      break;
    }
    case Kind::Cast: {
      n.op = Op::Cast;
      DType t = dtype(a);
      std::vector<DType> to;
      if (g_.grad)
        to = {t == DType::F64 ? DType::F32 : DType::F64};
      else if (t == DType::F32)
        to = {DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64};
      else if (t == DType::F64)
        to = {DType::F32, DType::F16, DType::I32};
      else if (is_float(t))
        to = {DType::F32, DType::F64};
      else
        to = {DType::F32, DType::F64, DType::F16};
      n.dtype = pick(to);
      break;
    }
  }
  return add(n) >= 0;
}

// The node's result must be tame (finite, bounded, small) and well-conditioned; then it is kept.
int Generator::add(Node n) {
  for (int a : n.args)
    if (a < 0) return -1;
  std::vector<Tensor> args;
  for (int a : n.args) args.push_back(t_[a]);
  Tensor t;
  try {
    t = apply_node(n, args);
  } catch (const Error& e) {
    g_.nodes.push_back(n);
    error_ = e.what();
    return -1;
  }
  if (t.numel() > kMaxNumel) return -1;
  if (g_.grad && !is_float(t.dtype()) && t.dtype() != DType::Bool) return -1;
  if (g_.grad && (t.dtype() == DType::F16 || t.dtype() == DType::BF16)) return -1;
  if (!is_float(t.dtype())) {  // integer arithmetic must not overflow: bound it before evaluating
    double m = 0;
    for (int a : n.args) m = n.op == Op::Mul ? std::max(m, 1.0) * f_[a].max_abs : m + f_[a].max_abs;
    if (n.op == Op::Sum) m *= static_cast<double>(numel_of(shape(n.args[0])));
    if (m > kMaxInt) return -1;
  }
  Fact f;
  try {
    f = fact_of(ref::evaluate(t.node(), false));
  } catch (const Error& e) {
    g_.nodes.push_back(n);
    error_ = std::string("reference interpreter: ") + e.what();
    return -1;
  }
  for (int64_t k = 0; k < f.val.numel(); k++)
    if (!std::isfinite(f.val.at(k))) return -1;
  if (f.max_abs > (is_float(t.dtype()) ? kMaxFloat : kMaxInt)) return -1;
  n.err = error_bound(n, f, t.dtype());
  if (!std::isfinite(n.err) || n.err > 0.05 * std::max(f.max_abs, 0.1)) return -1;
  g_.nodes.push_back(n);
  t_.push_back(t);
  f_.push_back(std::move(f));
  return size() - 1;
}

// The smallest distance of the node's arguments from a point where its result jumps (comparisons,
// float-to-int casts) or, in gradient graphs, where its derivative jumps (relu, abs, max); infinite
// where there is none. Ties that kiln computes exactly have distance 0 but are harmless forward.
double Generator::margin(const Node& n) {
  auto eval_min = [&](const Tensor& t) { return min_of(ref::evaluate(t.node(), false)); };
  auto f64 = [&](int a) { return t_[n.args[a]].to(DType::F64); };
  switch (n.op) {
    case Op::Less:
    case Op::Greater:
    case Op::Equal: return eval_min((f64(0) - f64(1)).abs());
    case Op::Maximum:
    case Op::Minimum: return g_.grad ? eval_min((f64(0) - f64(1)).abs()) : INFINITY;
    case Op::Relu:
    case Op::Abs: return g_.grad ? f_[n.args[0]].min_abs : INFINITY;
    case Op::Max: {
      if (!g_.grad) return INFINITY;
      Tensor x = f64(0), m = x.max(n.ints, true);
      Tensor ties = (x == m).to(DType::F64).sum(n.ints, true);
      if (-eval_min(-ties) > 1) return 0;
      return eval_min(where(x == m, full({}, INFINITY, DType::F64), m - x));
    }
    case Op::Cast: {
      const ref::Array& v = f_[n.args[0]].val;
      if (!is_float(v.dtype) || is_float(n.dtype)) return INFINITY;
      double m = INFINITY;  // trunc jumps at every nonzero integer
      for (int64_t k = 0; k < v.numel(); k++) {
        double x = std::fabs(v.at(k));
        m = std::min(m, x < 0.5 ? 1 - x : std::fabs(x - std::round(x)));
      }
      return m;
    }
    default: return INFINITY;
  }
}

// A bound on max |kiln - exact| over the node's elements, from its arguments' bounds and values, or
// infinity where the op is ill-conditioned at these values.
double Generator::error_bound(const Node& n, const Fact& out, DType out_dtype) {
  double u = unit_roundoff(out_dtype), R = out.max_abs;
  double e = 0, E = 0, M = 0;
  for (int a : n.args) E = std::max(E, err(a));
  if (!n.args.empty()) M = f_[n.args[0]].max_abs;
  auto arg = [&](int k) -> const Fact& { return f_[n.args[k]]; };
  auto E_ = [&](int k) { return err(n.args[k]); };
  double acc = std::min(u == 0 ? 0 : u, unit_roundoff(DType::F32));  // f16/bf16 accumulate in f32
  if (u == 0) acc = 0;
  double m = margin(n);
  double tie_err = n.op == Op::Where ? 0 : (n.args.size() > 1 ? E_(0) + E_(1) : E);
  if (m < kSafety * tie_err || (m == 0 && tie_err > 0)) return INFINITY;
  if (g_.grad && m < std::max(kKink, kSafety * tie_err)) return INFINITY;
  switch (n.op) {
    case Op::Input: return 0;
    case Op::Neg:
    case Op::Relu:
    case Op::Abs:
    case Op::Maximum:
    case Op::Minimum:
    case Op::Max:
    case Op::Reshape:
    case Op::Permute:
    case Op::Pad:
    case Op::Flip:
    case Op::Slice:
    case Op::Cat:
    case Op::Expand:
    case Op::Where: e = E; break;
    case Op::Less:
    case Op::Greater:
    case Op::Equal: e = 0; break;
    case Op::AddScalar: e = E + u * (R + std::fabs(n.scalar)); break;
    case Op::MulScalar: e = std::fabs(n.scalar) * E + u * R + u * std::fabs(n.scalar) * M; break;
    case Op::Exp: e = R * std::expm1(E + 2 * u * M) + kTranscendental * u * R; break;
    case Op::Log:
      if (arg(0).min_abs <= E) return INFINITY;
      e = E / (arg(0).min_abs - E) + kTranscendental * u * std::max(1.0, R);
      break;
    case Op::Sqrt:
      if (arg(0).min_abs <= E) return INFINITY;
      e = E / std::sqrt(arg(0).min_abs - E) + 2 * u * R;
      break;
    case Op::Tanh: e = E + kTranscendental * u * std::max(1.0, R); break;
    case Op::Sigmoid: e = E / 4 + kTranscendental * u; break;
    case Op::Add:
    case Op::Sub: e = E_(0) + E_(1) + u * R; break;
    case Op::Mul: e = E_(0) * arg(1).max_abs + E_(1) * arg(0).max_abs + E_(0) * E_(1) + u * R; break;
    case Op::Div:
      if (arg(1).min_abs <= E_(1)) return INFINITY;
      e = (E_(0) + R * E_(1)) / (arg(1).min_abs - E_(1)) + 2 * u * R;
      break;
    case Op::Sum:
    case Op::Mean: {
      double count = static_cast<double>(numel_of(shape(n.args[0])) / std::max<int64_t>(1, out.val.numel()));
      e = count * E + count * count * acc * M + u * R;
      if (n.op == Op::Mean) e = e / count + 2 * u * R;
      break;
    }
    case Op::Matmul: {
      double k = static_cast<double>(shape(n.args[0]).back());
      double ma = arg(0).max_abs, mb = arg(1).max_abs;
      e = k * (E_(0) * mb + E_(1) * ma + E_(0) * E_(1)) + k * k * acc * ma * mb + u * R;
      break;
    }
    case Op::Cast: e = is_float(n.dtype) ? E + u * R : 0; break;
  }
  return e;
}

void Generator::choose_outputs() {
  int last = -1;
  for (int i = 0; i < size(); i++)
    if (g_.nodes[i].op != Op::Input && (!g_.grad || is_float(dtype(i)))) last = i;
  if (last < 0) {  // no op with a usable result: tanh of the last float node (inputs are float)
    int a = size() - 1;
    while (!is_float(dtype(a))) a--;
    last = add(op_node(Op::Tanh, {a}));
    if (last < 0) last = a;
  }
  g_.outputs = {last};
  for (int extra = chance(0.3) ? uniform(1, 2) : 0; extra > 0; extra--) {
    int i = uniform(0, size() - 1);
    if (g_.nodes[i].op != Op::Input && std::find(g_.outputs.begin(), g_.outputs.end(), i) == g_.outputs.end())
      g_.outputs.push_back(i);
  }
  if (g_.grad)
    for (int64_t k = 0; k < t_[last].numel(); k++) g_.weights.push_back(static_cast<float>(real(-1, 1)));
}

}  // namespace

Generated generate(uint64_t seed, double grad_fraction) { return Generator(seed, grad_fraction).run(); }

}  // namespace kiln::fuzz
