// Interval analysis (vmin/vmax) and the symbolic rewrite rules for index expressions.
// Every rule states why it is valid; rules that need facts about values get them from the bounds.
#include "ir/simplify.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

namespace kiln::ir {

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------------------------
// Saturating helpers for the bound computations (bounds never wrap; a saturated bound means "at
// least/most this", which is still sound for index math that itself does not overflow).

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMax : kMin;
  return r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? kMin : kMax;
  return r;
}
int64_t sat_abs(int64_t a) { return a == kMin ? kMax : (a < 0 ? -a : a); }
int64_t sat_div(int64_t a, int64_t b) { return (a == kMin && b == -1) ? kMax : a / b; }  // b != 0

// Wrapping arithmetic for folding constants (int64 index math wraps like the generated code would).
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

struct Bounds {
  int64_t lo, hi;
};

bool index_dtype(DType t) { return t == DType::I64 || t == DType::Bool; }
bool is_int_arith(Op op) {
  return op == Op::ADD || op == Op::MUL || op == Op::IDIV || op == Op::MOD || op == Op::MAX;
}

// The nodes the analysis and the rules understand: I64/bool scalars with I64/bool scalar sources.
// Arithmetic (ADD, MUL, IDIV, MOD, MAX) is index math only in I64.
bool is_index(const Node& n) {
  if (!n.shape.empty() || !index_dtype(n.dtype)) return false;
  if (n.dtype == DType::Bool && is_int_arith(n.op)) return false;
  for (auto& s : n.src)
    if (!s->shape.empty() || !index_dtype(s->dtype)) return false;
  return true;
}

Bounds dtype_bounds(DType t) {
  switch (t) {
    case DType::Bool: return {0, 1};
    case DType::U8: return {0, 255};
    case DType::I8: return {-128, 127};
    case DType::I16: return {-32768, 32767};
    case DType::I32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::U32: return {0, std::numeric_limits<uint32_t>::max()};
    default: return {kMin, kMax};  // i64, u64 (not representable), floats
  }
}

// CAST to an index dtype from a non-float scalar: its bounds follow the source's.
bool is_int_cast(const Node& n) {
  return n.op == Op::CAST && n.shape.empty() && index_dtype(n.dtype) && n.src.size() == 1 &&
         n.src[0]->shape.empty() && !is_float(n.src[0]->dtype) && n.src[0]->dtype != DType::U64;
}

bool uses_src_bounds(const Node& n) { return is_index(n) || is_int_cast(n); }

Bounds src_bounds(const Node& n, size_t i) { return {n.src[i]->vmin_, n.src[i]->vmax_}; }

Bounds mul_bounds(Bounds a, Bounds b) {
  int64_t c[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

Bounds div_bounds(Bounds a, Bounds b) {
  if (b.lo > 0 || b.hi < 0) {
    // C division is monotone in each argument while the divisor keeps its sign: extremes at corners.
    int64_t c[4] = {sat_div(a.lo, b.lo), sat_div(a.lo, b.hi), sat_div(a.hi, b.lo), sat_div(a.hi, b.hi)};
    return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
  }
  int64_t m = std::max(sat_abs(a.lo), sat_abs(a.hi));  // |x / y| <= |x| for y != 0
  return {-m, m};
}

Bounds mod_bounds(Bounds a, Bounds b) {
  int64_t c = std::max(sat_abs(b.lo), sat_abs(b.hi));  // |x % y| < |y| <= c
  if (c == 0) return {kMin, kMax};                     // always a division by zero
  if (b.lo == b.hi && a.lo != kMin && a.hi != kMax && a.lo / c == a.hi / c) {
    // one truncation bucket: x % c == x - q*c with q constant, monotone in x
    int64_t q = a.lo / c;
    return {a.lo - q * c, a.hi - q * c};
  }
  // the result has the sign of x, and |x % y| <= |x|
  int64_t lo = a.lo >= 0 ? 0 : std::max(a.lo, -(c - 1));
  int64_t hi = a.hi <= 0 ? 0 : std::min(a.hi, c - 1);
  return {lo, hi};
}

// Smallest 2^k - 1 >= v (v >= 0).
int64_t all_ones_cover(int64_t v) {
  int64_t m = 0;
  while (m < v) m = m * 2 + 1;
  return m;
}

Bounds compute_bounds(const Node& n) {
  Bounds full = dtype_bounds(n.dtype);
  if (!n.shape.empty() || !index_dtype(n.dtype)) return full;
  if (n.op == Op::CONST) return {n.ival(), n.ival()};  // bool constants are stored as 0/1
  if (n.op == Op::RANGE) return {0, std::max<int64_t>(0, n.arg.size() > 1 ? n.arg[1] - 1 : 0)};
  if (n.op == Op::VAR) return {n.arg[1], n.arg[2]};
  if (is_int_cast(n)) {
    Bounds s = src_bounds(n, 0);
    if (n.dtype != DType::Bool) return s;
    if (s.lo > 0 || s.hi < 0) return {1, 1};
    return s.lo == 0 && s.hi == 0 ? Bounds{0, 0} : Bounds{0, 1};
  }
  if (!is_index(n)) return full;
  bool is_bool = n.dtype == DType::Bool;
  switch (n.op) {
    case Op::ADD: {
      Bounds a = src_bounds(n, 0), b = src_bounds(n, 1);
      return {sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
    }
    case Op::MUL: return mul_bounds(src_bounds(n, 0), src_bounds(n, 1));
    case Op::IDIV: return div_bounds(src_bounds(n, 0), src_bounds(n, 1));
    case Op::MOD: return mod_bounds(src_bounds(n, 0), src_bounds(n, 1));
    case Op::MAX: {
      Bounds a = src_bounds(n, 0), b = src_bounds(n, 1);
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    case Op::CMPLT: {
      Bounds a = src_bounds(n, 0), b = src_bounds(n, 1);
      if (a.hi < b.lo) return {1, 1};
      if (a.lo >= b.hi) return {0, 0};
      return {0, 1};
    }
    case Op::CMPNE: {
      Bounds a = src_bounds(n, 0), b = src_bounds(n, 1);
      if (a.hi < b.lo || b.hi < a.lo) return {1, 1};
      if (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo) return {0, 0};
      return {0, 1};
    }
    case Op::AND:
    case Op::OR:
    case Op::XOR: {
      Bounds a = src_bounds(n, 0), b = src_bounds(n, 1);
      if (is_bool) {
        if (n.op == Op::AND) return {a.lo & b.lo, a.hi & b.hi};  // monotone on {0, 1}
        if (n.op == Op::OR) return {a.lo | b.lo, a.hi | b.hi};
        if (a.lo == a.hi) return a.lo ? Bounds{1 - b.hi, 1 - b.lo} : b;  // xor with a constant
        if (b.lo == b.hi) return b.lo ? Bounds{1 - a.hi, 1 - a.lo} : a;
        return {0, 1};
      }
      if (n.op == Op::AND) {  // x & y lies in [0, x] when x >= 0
        if (a.lo >= 0 && b.lo >= 0) return {0, std::min(a.hi, b.hi)};
        if (a.lo >= 0) return {0, a.hi};
        if (b.lo >= 0) return {0, b.hi};
        return full;
      }
      if (a.lo >= 0 && b.lo >= 0) {  // no bit above the highest bit of either operand
        int64_t lo = n.op == Op::OR ? std::max(a.lo, b.lo) : 0;
        return {lo, all_ones_cover(std::max(a.hi, b.hi))};
      }
      return full;
    }
    case Op::WHERE: {
      Bounds c = src_bounds(n, 0), a = src_bounds(n, 1), b = src_bounds(n, 2);
      if (c.lo == c.hi) return c.lo ? a : b;
      return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    default: return full;
  }
}

void ensure_bounds(const NodeRef& root) {
  if (root->has_bounds) return;
  // iterative post-order over the nodes whose bounds are still missing
  std::vector<const Node*> stack{root.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    if (n->has_bounds) {
      stack.pop_back();
      continue;
    }
    bool ready = true;
    if (uses_src_bounds(*n))
      for (auto& s : n->src)
        if (!s->has_bounds) {
          stack.push_back(s.get());
          ready = false;
        }
    if (!ready) continue;
    Bounds b = compute_bounds(*n);
    n->vmin_ = b.lo;
    n->vmax_ = b.hi;
    n->has_bounds = true;
    stack.pop_back();
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers for the rules.

std::optional<int64_t> as_const(const NodeRef& n) {
  if (n->op == Op::CONST && n->shape.empty() && !is_float(n->dtype)) return n->ival();
  return std::nullopt;
}

// Value of an op over constant operands (C semantics, int64 wraps); nullopt for x/0 and x%0.
std::optional<int64_t> eval_const(const Node& n) {
  std::vector<int64_t> v;
  for (auto& s : n.src) {
    auto c = as_const(s);
    if (!c) return std::nullopt;
    v.push_back(*c);
  }
  switch (n.op) {
    case Op::ADD: return wrap_add(v[0], v[1]);
    case Op::MUL: return wrap_mul(v[0], v[1]);
    case Op::IDIV:
      if (v[1] == 0) return std::nullopt;
      return v[1] == -1 ? wrap_mul(v[0], -1) : v[0] / v[1];
    case Op::MOD:
      if (v[1] == 0) return std::nullopt;
      return v[1] == -1 ? 0 : v[0] % v[1];
    case Op::MAX: return std::max(v[0], v[1]);
    case Op::CMPLT: return v[0] < v[1];
    case Op::CMPNE: return v[0] != v[1];
    case Op::AND: return v[0] & v[1];
    case Op::OR: return v[0] | v[1];
    case Op::XOR: return v[0] ^ v[1];
    case Op::WHERE: return v[0] ? v[1] : v[2];
    case Op::CAST: return v[0];  // const_int turns it into 0/1 for bool
    default: return std::nullopt;
  }
}

// A sum flattened into terms base*coeff (first appearance order, like terms combined) plus a constant.
struct Term {
  NodeRef base;
  int64_t coeff;
};
struct Sum {
  std::vector<Term> terms;
  int64_t konst = 0;
};

bool is_sum(const NodeRef& n) { return n->op == Op::ADD && n->dtype == DType::I64 && n->shape.empty(); }

Sum flatten_sum(const NodeRef& n) {
  Sum s;
  std::vector<NodeRef> stack{n};
  while (!stack.empty()) {
    NodeRef t = stack.back();
    stack.pop_back();
    if (is_sum(t)) {  // left operand first
      stack.push_back(t->src[1]);
      stack.push_back(t->src[0]);
      continue;
    }
    if (auto c = as_const(t)) {
      s.konst = wrap_add(s.konst, *c);
      continue;
    }
    NodeRef base = t;
    int64_t coeff = 1;
    if (t->op == Op::MUL && t->dtype == DType::I64) {
      if (auto c = as_const(t->src[1])) {
        base = t->src[0];
        coeff = *c;
      }
    }
    auto it = std::find_if(s.terms.begin(), s.terms.end(), [&](const Term& x) { return x.base == base; });
    if (it != s.terms.end())
      it->coeff = wrap_add(it->coeff, coeff);
    else
      s.terms.push_back({base, coeff});
  }
  std::erase_if(s.terms, [](const Term& x) { return x.coeff == 0; });
  return s;
}

NodeRef build_sum(const std::vector<Term>& terms, int64_t konst) {
  NodeRef acc;
  for (auto& t : terms) {
    NodeRef x = t.coeff == 1 ? t.base : t.base * t.coeff;
    acc = acc ? acc + x : x;
  }
  if (!acc) return const_int(konst);
  return konst ? acc + konst : acc;
}

uint64_t magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

NodeRef changed(const NodeRef& n, NodeRef r) { return r.get() == n.get() ? nullptr : r; }

// ---------------------------------------------------------------------------------------------
// Rules. Each receives a node whose sources are already simplified and returns a replacement or
// nullptr. All of them run only on index nodes (see is_index).

// All sources are constants: evaluate the op (int and bool; division by zero is left alone).
NodeRef fold_constants(const NodeRef& n) {
  if (n->src.empty()) return nullptr;
  auto v = eval_const(*n);
  return v ? const_int(*v, n->dtype) : nullptr;
}

// Interval analysis proves the node takes one value at every point, so it is that constant. This
// also decides comparisons by bounds (x < c is true when vmax(x) < c, false when vmin(x) >= c; likewise
// CMPNE), folds x*0 and x%1, and x//c where all of x lies in one bucket. Saturated bounds are not trusted.
NodeRef fold_by_bounds(const NodeRef& n) {
  if (n->src.empty()) return nullptr;
  int64_t lo = vmin(n), hi = vmax(n);
  if (lo != hi || lo == kMin || lo == kMax) return nullptr;
  return const_int(lo, n->dtype);
}

// Commutative op: a op b == b op a; the canonical form keeps a constant on the right.
NodeRef const_to_right(const NodeRef& n) {
  if (n->src[0]->op == Op::CONST && n->src[1]->op != Op::CONST) return with_src(n, {n->src[1], n->src[0]});
  return nullptr;
}

// Addition is associative and commutative, so a sum may be flattened, like terms combined
// (x*a + x*b == x*(a+b)), zero terms (x+0, x*0) dropped and the constants summed on the right.
// Also (x//c)*(b*c) + (x%c)*b == x*b for c > 0: C division satisfies x == (x/c)*c + x%c for
// every x, so this holds for negative x too (it rejoins a dim the loop collapsing split).
NodeRef canonical_sum(const NodeRef& n) {
  Sum s = flatten_sum(n);
  for (size_t i = 0; i < s.terms.size(); i++) {
    const Term& d = s.terms[i];
    if (d.base->op != Op::IDIV) continue;
    auto c = as_const(d.base->src[1]);
    if (!c || *c <= 0) continue;
    for (size_t j = 0; j < s.terms.size(); j++) {
      const Term& m = s.terms[j];
      if (m.base->op != Op::MOD || m.base->src[0] != d.base->src[0] || m.base->src[1] != d.base->src[1])
        continue;
      int64_t bc;
      if (__builtin_mul_overflow(m.coeff, *c, &bc) || bc != d.coeff) continue;
      Term joined{d.base->src[0], m.coeff};
      s.terms.erase(s.terms.begin() + static_cast<long>(std::max(i, j)));
      s.terms.erase(s.terms.begin() + static_cast<long>(std::min(i, j)));
      s.terms.push_back(joined);
      return build_sum(s.terms, s.konst);
    }
  }
  return changed(n, build_sum(s.terms, s.konst));
}

// x*1 == x and x*0 == 0 for integers.
NodeRef mul_identity(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (c == 1) return n->src[0];
  if (c == 0) return const_int(0);
  return nullptr;
}

// (x*a)*b == x*(a*b): multiplication is associative.
NodeRef mul_assoc(const NodeRef& n) {
  auto b = as_const(n->src[1]);
  const NodeRef& in = n->src[0];
  if (!b || in->op != Op::MUL) return nullptr;
  auto a = as_const(in->src[1]);
  return a ? in->src[0] * wrap_mul(*a, *b) : nullptr;
}

// (x + y)*c == x*c + y*c: distributivity; puts the sum in the flat form the div/mod rules read.
NodeRef mul_distribute(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (!c || !is_sum(n->src[0])) return nullptr;
  Sum s = flatten_sum(n->src[0]);
  for (auto& t : s.terms) t.coeff = wrap_mul(t.coeff, *c);
  return build_sum(s.terms, wrap_mul(s.konst, *c));
}

// x//1 == x, x//-1 == -x.
NodeRef div_identity(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (c == 1) return n->src[0];
  if (c == -1) return n->src[0] * -1;
  return nullptr;
}

// A common factor g of every term, the constant and the divisor: (g*x)//(g*c) == x//c because the
// exact quotient is the same rational number, and (g*x)%(g*c) == g*(x%c) because
// g*x - g*c*trunc(x/c) == g*(x - c*trunc(x/c)). (x*c)//c -> x and (x*c)%c -> 0 follow via c' = 1.
NodeRef common_factor(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (!c || *c == 0) return nullptr;
  Sum s = flatten_sum(n->src[0]);
  uint64_t g = magnitude(*c);
  g = std::gcd(g, magnitude(s.konst));
  for (auto& t : s.terms) g = std::gcd(g, magnitude(t.coeff));
  if (g <= 1 || g > static_cast<uint64_t>(kMax)) return nullptr;
  int64_t gi = static_cast<int64_t>(g);
  for (auto& t : s.terms) t.coeff /= gi;
  NodeRef x = build_sum(s.terms, s.konst / gi);
  if (n->op == Op::IDIV) return idiv(x, *c / gi);
  return mod(x, *c / gi) * gi;
}

// Sum split for c > 0: write x = c*K + r where K collects floor(a/c)*t of each term a*t (whole when
// c divides a; for a nonnegative t with a > c, also the multiple-of-c part of a, leaving
// (a mod c)*t in r) and floor(constant/c), and r the rest. When x >= 0 and r >= 0 everywhere, C
// division is floor division, so x//c == K + r//c and x%c == r%c. With 0 <= r < c this is
// (x*4+y)//4 -> x and (x*4+y)%4 -> y, and (k*6+j)%5 -> (k+j)%5 (r//c and r%c then fold by bounds).
NodeRef split_sum(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (!c || *c <= 0) return nullptr;
  const NodeRef& x = n->src[0];
  Sum s = flatten_sum(x);
  std::vector<Term> quot, rest;
  for (auto& t : s.terms) {
    if (t.coeff % *c == 0) {
      quot.push_back({t.base, t.coeff / *c});
    } else if (vmin(t.base) >= 0 && t.coeff > *c) {
      int64_t q = floor_div(t.coeff, *c);
      quot.push_back({t.base, q});
      rest.push_back({t.base, t.coeff - q * *c});
    } else {
      rest.push_back(t);
    }
  }
  if (quot.empty() || vmin(x) < 0) return nullptr;
  int64_t kq = floor_div(s.konst, *c);
  NodeRef r = build_sum(rest, s.konst - kq * *c);
  if (vmin(r) < 0) return nullptr;
  if (n->op == Op::MOD) return mod(r, *c);
  return build_sum(quot, kq) + idiv(r, *c);
}

// A factor a of c that divides part of a sum: x = a*T + r with 0 <= r < a and T >= 0 gives
// x//c == T//(c/a) and x%c == (T%(c/a))*a + r, since x//a == T and x%a == r (floor division of
// nonnegatives). (b*50304 + v)//(1024*50304) -> b//1024 for 0 <= v < 50304.
NodeRef split_factor(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  const NodeRef& x = n->src[0];
  if (!c || *c <= 1 || vmin(x) < 0) return nullptr;
  Sum s = flatten_sum(x);
  for (auto& cand : s.terms) {
    int64_t a = static_cast<int64_t>(std::gcd(magnitude(*c), magnitude(cand.coeff)));
    if (a <= 1 || a == *c) continue;
    std::vector<Term> whole, rest;
    for (auto& t : s.terms)
      (t.coeff % a == 0 ? whole : rest).push_back(t.coeff % a == 0 ? Term{t.base, t.coeff / a} : t);
    int64_t kq = floor_div(s.konst, a);
    NodeRef r = build_sum(rest, s.konst - kq * a), q = build_sum(whole, kq);
    if (vmin(r) < 0 || vmax(r) >= a || vmin(q) < 0) continue;
    if (n->op == Op::IDIV) return idiv(q, *c / a);
    return mod(q, *c / a) * a + r;
  }
  return nullptr;
}

// (x//a)//b == x//(a*b) for a, b > 0: floor(floor(x/a)/b) == floor(x/(a*b)) for x >= 0, and C
// division is sign-symmetric (trunc(x/d) == -trunc(-x/d)), so it holds for negative x too.
NodeRef div_of_div(const NodeRef& n) {
  auto b = as_const(n->src[1]);
  const NodeRef& in = n->src[0];
  if (!b || *b <= 0 || in->op != Op::IDIV) return nullptr;
  auto a = as_const(in->src[1]);
  int64_t ab;
  if (!a || *a <= 0 || __builtin_mul_overflow(*a, *b, &ab)) return nullptr;
  return idiv(in->src[0], ab);
}

// (x % m)//c == (x//c) % (m/c) when c divides m, c, m > 0 and x >= 0: with x = q*m + x%m,
// x//c == q*(m/c) + (x%m)//c and 0 <= (x%m)//c < m/c. The div can then fold into sums of x.
NodeRef div_of_mod(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  const NodeRef& in = n->src[0];
  if (!c || *c <= 0 || in->op != Op::MOD) return nullptr;
  auto m = as_const(in->src[1]);
  if (!m || *m <= 0 || *m % *c != 0 || vmin(in->src[0]) < 0) return nullptr;
  return mod(idiv(in->src[0], *c), *m / *c);
}

// x%1 == 0 and x%-1 == 0.
NodeRef mod_identity(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  return (c == 1 || c == -1) ? const_int(0) : nullptr;
}

// x % -c == x % c: the C remainder has the sign of x and magnitude |x| mod |c|.
NodeRef mod_negative_divisor(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  return (c && *c < 0 && *c != kMin) ? mod(n->src[0], -*c) : nullptr;
}

// x%c with all of x in one truncation bucket q = trunc(x/c): x%c == x - q*c. For 0 <= x < c (or
// -c < x < c) that is x itself.
NodeRef mod_one_bucket(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  const NodeRef& x = n->src[0];
  if (!c || *c <= 0) return nullptr;
  int64_t lo = vmin(x), hi = vmax(x);
  if (lo == kMin || hi == kMax || lo / *c != hi / *c) return nullptr;
  int64_t q = lo / *c;
  return q == 0 ? x : x + (-q * *c);
}

// (x%a)%b == x%b when b divides a: x%a has the sign of x (or is 0) and is congruent to x modulo a,
// hence modulo b, and the C remainder is determined by that congruence and the sign.
NodeRef mod_of_mod(const NodeRef& n) {
  auto b = as_const(n->src[1]);
  const NodeRef& in = n->src[0];
  if (!b || *b == 0 || in->op != Op::MOD) return nullptr;
  auto a = as_const(in->src[1]);
  if (!a || *a == 0 || *a % *b != 0) return nullptr;
  return mod(in->src[0], *b);
}

// (x + k) < c == x < c - k and (x + k) != c == x != c - k: subtracting k from both sides (no overflow
// in index math).
NodeRef cmp_move_const(const NodeRef& n) {
  auto c = as_const(n->src[1]);
  if (!c || !is_sum(n->src[0])) return nullptr;
  Sum s = flatten_sum(n->src[0]);
  int64_t rhs;
  if (s.konst == 0 || s.terms.empty() || __builtin_sub_overflow(*c, s.konst, &rhs)) return nullptr;
  return alu(n->op, build_sum(s.terms, 0), const_int(rhs));
}

// AND, OR and XOR are associative and commutative: flatten the chain, combine the constants (on the
// right), drop the identity (x & true/-1, x | false/0, x ^ false/0), use the absorbing element
// (x & 0 -> 0, x | true/-1 -> true/-1), x & x == x, x | x == x, x ^ x == 0. Bool xor true is not,
// so not(not(x)) == x follows.
NodeRef canonical_bitwise(const NodeRef& n) {
  Op op = n->op;
  bool is_bool = n->dtype == DType::Bool;
  int64_t ones = is_bool ? 1 : -1;
  int64_t identity = op == Op::AND ? ones : 0;
  int64_t acc = identity;
  std::vector<NodeRef> terms;
  std::vector<NodeRef> stack{n};
  while (!stack.empty()) {
    NodeRef t = stack.back();
    stack.pop_back();
    if (t->op == op && t->dtype == n->dtype && t->shape.empty()) {
      stack.push_back(t->src[1]);
      stack.push_back(t->src[0]);
    } else if (auto c = as_const(t)) {
      acc = op == Op::AND ? acc & *c : op == Op::OR ? acc | *c : acc ^ *c;
    } else {
      auto it = std::find(terms.begin(), terms.end(), t);
      if (it == terms.end())
        terms.push_back(t);
      else if (op == Op::XOR)
        terms.erase(it);  // x ^ x == 0; AND/OR keep one copy
    }
  }
  if ((op == Op::AND && acc == 0) || (op == Op::OR && acc == ones)) return const_int(acc, n->dtype);
  NodeRef r;
  for (auto& t : terms) r = r ? alu(op, r, t) : t;
  if (acc != identity || !r) r = r ? alu(op, r, const_int(acc, n->dtype)) : const_int(acc, n->dtype);
  return changed(n, r);
}

// v & m == v for integers when m = 2^k - 1 and 0 <= v <= m: v has no bit outside the mask.
NodeRef and_redundant_mask(const NodeRef& n) {
  auto m = as_const(n->src[1]);
  if (n->dtype != DType::I64 || !m || *m < 0) return nullptr;
  uint64_t um = static_cast<uint64_t>(*m);
  if ((um & (um + 1)) != 0) return nullptr;
  const NodeRef& v = n->src[0];
  return (vmin(v) >= 0 && vmax(v) <= *m) ? v : nullptr;
}

// max(a, b) == a when a >= b everywhere (vmin(a) >= vmax(b)), and b in the mirrored case; max(x, x) == x.
NodeRef max_by_bounds(const NodeRef& n) {
  const NodeRef &a = n->src[0], &b = n->src[1];
  if (a == b || vmin(a) >= vmax(b)) return a;
  if (vmin(b) >= vmax(a)) return b;
  return nullptr;
}

// where(c, a, b) picks a branch when c is constant; where(c, x, x) == x.
NodeRef where_select(const NodeRef& n) {
  if (n->src[1] == n->src[2]) return n->src[1];
  if (auto c = as_const(n->src[0])) return *c ? n->src[1] : n->src[2];
  return nullptr;
}

// A cast to its own dtype is the identity.
NodeRef cast_noop(const NodeRef& n) { return n->src[0]->dtype == n->dtype ? n->src[0] : nullptr; }

// Runs f only on index nodes of the expected arity.
Rule index_rule(NodeRef (*f)(const NodeRef&)) {
  return [f](const NodeRef& n) -> NodeRef {
    if (!is_index(*n)) return nullptr;
    size_t arity = n->op == Op::WHERE ? 3 : n->op == Op::CAST ? 1 : 2;
    return n->src.size() == arity ? f(n) : nullptr;
  };
}

// --- the index of a gated load, simplified where its gate holds ---

struct Narrowed {
  NodeRef range;
  int64_t lo, hi;
};

// Tightens the bounds of RANGE nodes from one clause `e < c` or `e >= c` of a gate, for e a sum of
// RANGE terms: each term's bound given the other terms' extremes.
void tighten(const NodeRef& clause, std::unordered_map<const Node*, Narrowed>& b) {
  bool below = clause->op == Op::CMPLT;
  NodeRef cmp = clause;
  if (clause->op == Op::XOR && clause->src[0]->op == Op::CMPLT && as_const(clause->src[1]) == 1)
    cmp = clause->src[0];
  else if (!below)
    return;
  auto c = as_const(cmp->src[1]);
  if (!c || cmp->src[0]->dtype != DType::I64) return;
  Sum s = flatten_sum(cmp->src[0]);
  constexpr int64_t kBig = int64_t{1} << 31;
  for (auto& t : s.terms)
    if (t.base->op != Op::RANGE || t.coeff > kBig || t.coeff < -kBig || t.base->arg[1] > kBig) return;
  for (auto& t : s.terms) b.emplace(t.base.get(), Narrowed{t.base, 0, t.base->arg[1] - 1});
  auto least = [&](const Term& t) -> __int128 {
    const Narrowed& r = b.at(t.base.get());
    return static_cast<__int128>(t.coeff) * (t.coeff > 0 ? r.lo : r.hi);
  };
  auto most = [&](const Term& t) -> __int128 {
    const Narrowed& r = b.at(t.base.get());
    return static_cast<__int128>(t.coeff) * (t.coeff > 0 ? r.hi : r.lo);
  };
  for (auto& t : s.terms) {
    // below: coeff*x <= c - 1 - konst - (the others' least); else coeff*x >= c - konst - (their most)
    __int128 rest = static_cast<__int128>(*c) - s.konst - (below ? 1 : 0);
    for (auto& o : s.terms)
      if (o.base != t.base) rest -= below ? least(o) : most(o);
    Narrowed& r = b.at(t.base.get());
    __int128 a = t.coeff > 0 ? t.coeff : -static_cast<__int128>(t.coeff), v = t.coeff > 0 ? rest : -rest;
    // coeff > 0: x <= floor(v/a) (below) or x >= ceil(v/a); coeff < 0 flips the side
    __int128 fl = v >= 0 ? v / a : -((-v + a - 1) / a), cl = v >= 0 ? (v + a - 1) / a : -((-v) / a);
    if (below == (t.coeff > 0)) {
      if (fl < r.hi) r.hi = static_cast<int64_t>(std::max<__int128>(fl, r.lo - 1));
    } else if (cl > r.lo) {
      r.lo = static_cast<int64_t>(std::min<__int128>(cl, r.hi + 1));
    }
  }
}

// LOAD(buf, idx, gate): idx only matters where the gate holds, so idx is simplified over the
// ranges the gate's clauses leave (a padded view's index: (c - 1536)//64 where c >= 1536). A
// narrowed range x in [lo, hi] is x' + lo for a fresh x' in [0, hi - lo] while simplifying.
NodeRef load_given_gate(const NodeRef& n) {
  if (n->src.size() != 3 || n->src[1]->dtype != DType::I64) return nullptr;
  std::unordered_map<const Node*, Narrowed> bounds;
  std::vector<NodeRef> clauses{n->src[2]};
  for (size_t i = 0; i < clauses.size(); i++) {
    if (clauses[i]->op != Op::AND) {
      tighten(clauses[i], bounds);
      continue;
    }
    clauses.push_back(clauses[i]->src[0]);
    clauses.push_back(clauses[i]->src[1]);
  }
  std::unordered_map<const Node*, NodeRef> in, out;
  for (auto& [p, r] : bounds) {
    if (r.lo > r.hi || (r.lo == 0 && r.hi == r.range->arg[1] - 1)) continue;
    NodeRef x = range((int64_t{1} << 40) + r.range->arg[0], r.hi - r.lo + 1, false);
    in[p] = r.lo ? x + r.lo : x;
    out[x.get()] = r.lo ? r.range + (-r.lo) : r.range;
  }
  if (in.empty()) return nullptr;
  NodeRef idx = simplify(substitute(simplify(substitute(n->src[1], in)), out));
  if (idx == n->src[1]) return nullptr;
  return make(Op::LOAD, n->dtype, n->shape, {n->src[0], idx, n->src[2]}, n->arg, n->fval);
}

RuleSet build_rules() {
  RuleSet rs("symbolic");
  auto on = [&](std::initializer_list<Op> ops, NodeRef (*f)(const NodeRef&)) { rs.on(ops, index_rule(f)); };
  const auto all = {Op::ADD,   Op::MUL, Op::IDIV, Op::MOD, Op::MAX,   Op::CMPLT,
                    Op::CMPNE, Op::AND, Op::OR,   Op::XOR, Op::WHERE, Op::CAST};
  on(all, fold_constants);
  on(all, fold_by_bounds);
  on({Op::MUL, Op::MAX, Op::CMPNE}, const_to_right);
  on({Op::ADD}, canonical_sum);
  on({Op::MUL}, mul_identity);
  on({Op::MUL}, mul_assoc);
  on({Op::MUL}, mul_distribute);
  on({Op::IDIV}, div_identity);
  on({Op::IDIV, Op::MOD}, common_factor);
  on({Op::IDIV, Op::MOD}, split_sum);
  on({Op::IDIV, Op::MOD}, split_factor);
  on({Op::IDIV}, div_of_div);
  on({Op::IDIV}, div_of_mod);
  on({Op::MOD}, mod_identity);
  on({Op::MOD}, mod_negative_divisor);
  on({Op::MOD}, mod_one_bucket);
  on({Op::MOD}, mod_of_mod);
  on({Op::CMPLT, Op::CMPNE}, cmp_move_const);
  on({Op::AND, Op::OR, Op::XOR}, canonical_bitwise);
  on({Op::AND}, and_redundant_mask);
  on({Op::MAX}, max_by_bounds);
  on({Op::WHERE}, where_select);
  on({Op::CAST}, cast_noop);
  rs.on({Op::LOAD}, load_given_gate);
  return rs;
}

}  // namespace

int64_t vmin(const NodeRef& e) {
  ensure_bounds(e);
  return e->vmin_;
}

int64_t vmax(const NodeRef& e) {
  ensure_bounds(e);
  return e->vmax_;
}

const RuleSet& symbolic_rules() {
  static const RuleSet rules = build_rules();
  return rules;
}

NodeRef simplify(const NodeRef& e) {
  // rewrite() stops at a fixed point of the rules; a second pass is a cheap guard for rule outputs
  // that reuse nodes rewrite() has already seen (see the note on Rewriter's fresh-source check).
  NodeRef cur = e;
  for (int pass = 0; pass < 8; pass++) {
    NodeRef next = rewrite(cur, symbolic_rules());
    if (next.get() == cur.get()) break;
    cur = next;
  }
  return cur;
}

}  // namespace kiln::ir
