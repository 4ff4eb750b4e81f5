// kiln_fuzz's error analysis of tensor-level IR graphs (see bound.h).
#include "bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "engine/interpreter.h"
#include "generator.h"

namespace kiln::fuzz {

namespace {

constexpr double kTranscendental = 8;  // ulps of slack for exp2/log2/sin
constexpr double kSafety = 4;          // thresholds must be this many error bounds away

struct Stats {
  double max_abs = 0, min_abs = std::numeric_limits<double>::infinity();
};

Stats stats_of(const ref::Array& a) {
  Stats s;
  for (int64_t k = 0; k < a.numel(); k++) {
    double v = std::fabs(a.at(k));
    s.max_abs = std::max(s.max_abs, v), s.min_abs = std::min(s.min_abs, v);
  }
  return s;
}

// The smallest distance from x's elements to a nonzero integer (where trunc jumps).
double integer_margin(const ref::Array& x) {
  double m = std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < x.numel(); k++) {
    double v = std::fabs(x.at(k));
    m = std::min(m, v < 0.5 ? 1 - v : std::fabs(v - std::round(v)));
  }
  return m;
}

const ir::Node* through_views(const ir::Node* n) {
  while (n->op == ir::Op::EXPAND || n->op == ir::Op::RESHAPE || n->op == ir::Op::PERMUTE ||
         n->op == ir::Op::CONTIGUOUS || n->op == ir::Op::DETACH)
    n = n->src[0].get();
  return n;
}

// Whether a is a max-reduction of b: kiln's max is one of its elements exactly, so where they are
// equal (the gradient of max compares them) they are equal in kiln too.
bool max_of(const ir::Node* a, const ir::Node* b) {
  a = through_views(a);
  return a->op == ir::Op::REDUCE && static_cast<ir::Op>(a->arg[0]) == ir::Op::MAX &&
         through_views(a->src[0].get()) == through_views(b);
}

double difference_margin(const ir::Node& n, const ref::Array& a, const ref::Array& b) {
  bool ties_exact = max_of(n.src[0].get(), n.src[1].get()) || max_of(n.src[1].get(), n.src[0].get());
  double m = std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < a.numel(); k++) {
    double d = std::fabs(a.at(k) - b.at(k));
    if (d > 0 || !ties_exact) m = std::min(m, d);
  }
  return m;
}

// A result that jumps at a threshold is exact when its inputs are, else it needs a margin.
double jump(double margin, double err) { return err == 0 || margin > kSafety * err ? 0 : INFINITY; }

}  // namespace

std::vector<double> error_bounds(const std::vector<ir::NodeRef>& roots) {
  std::vector<ir::NodeRef> order;  // sources before users
  std::unordered_map<const ir::Node*, size_t> index;
  auto visit = [&](auto& self, const ir::NodeRef& n) -> void {
    if (index.count(n.get())) return;
    for (const auto& s : n->src) self(self, s);
    index[n.get()] = order.size();
    order.push_back(n);
  };
  for (const auto& r : roots) visit(visit, r);
  std::vector<ref::Array> val = ref::evaluate(order, false);
  std::vector<Stats> st;
  for (const auto& v : val) st.push_back(stats_of(v));
  std::vector<double> err(order.size(), 0);

  for (size_t i = 0; i < order.size(); i++) {
    const ir::Node& n = *order[i];
    std::vector<size_t> s;
    for (const auto& x : n.src) s.push_back(index[x.get()]);
    auto E = [&](size_t k) { return err[s[k]]; };
    auto M = [&](size_t k) { return st[s[k]].max_abs; };
    auto lo = [&](size_t k) { return st[s[k]].min_abs; };
    double u = unit_roundoff(n.dtype), R = st[i].max_abs, e = 0;
    switch (n.op) {
      case ir::Op::BUFFER:
      case ir::Op::IOTA: e = 0; break;
      case ir::Op::CONST: e = u * std::fabs(n.fval); break;
      case ir::Op::EXP2: e = R * std::expm1(E(0) * std::log(2.0)) + kTranscendental * u * R; break;
      case ir::Op::LOG2:
        e = lo(0) <= E(0) ? INFINITY
                          : E(0) / ((lo(0) - E(0)) * std::log(2.0)) + kTranscendental * u * std::max(1.0, R);
        break;
      case ir::Op::SIN: e = E(0) + kTranscendental * u * std::max(1.0, R); break;
      case ir::Op::SQRT: e = lo(0) <= E(0) ? INFINITY : E(0) / std::sqrt(lo(0) - E(0)) + u * R; break;
      case ir::Op::RECIP: e = lo(0) <= E(0) ? INFINITY : E(0) / (lo(0) * (lo(0) - E(0))) + u * R; break;
      case ir::Op::TRUNC: e = jump(integer_margin(val[s[0]]), E(0)); break;
      case ir::Op::CAST:
        if (is_float(n.dtype))
          e = E(0) + u * R;
        else if (n.dtype == DType::Bool)
          e = jump(lo(0), E(0));
        else
          e = jump(integer_margin(val[s[0]]), E(0));
        break;
      case ir::Op::ADD: e = E(0) + E(1) + u * R; break;
      case ir::Op::MUL: e = E(0) * M(1) + E(1) * M(0) + E(0) * E(1) + u * R; break;
      case ir::Op::MULACC: e = E(0) * M(1) + E(1) * M(0) + E(0) * E(1) + E(2) + 2 * u * R; break;
      case ir::Op::MAX:
      case ir::Op::AND:
      case ir::Op::OR:
      case ir::Op::XOR: e = std::max(E(0), E(1)); break;
      case ir::Op::CMPLT:
      case ir::Op::CMPNE: e = jump(difference_margin(n, val[s[0]], val[s[1]]), E(0) + E(1)); break;
      case ir::Op::WHERE: e = E(0) > 0 ? INFINITY : std::max(E(1), E(2)); break;
      case ir::Op::REDUCE: {
        double count =
            static_cast<double>(val[s[0]].numel()) / std::max<double>(1, static_cast<double>(val[i].numel()));
        auto rop = static_cast<ir::Op>(n.arg[0]);
        if (rop == ir::Op::MAX)
          e = E(0);
        else if (rop == ir::Op::ADD)
          e = count * E(0) + count * count * u * M(0) + u * R;
        else
          e = E(0) == 0 && u == 0 ? 0 : INFINITY;
        break;
      }
      case ir::Op::RESHAPE:
      case ir::Op::PERMUTE:
      case ir::Op::EXPAND:
      case ir::Op::PAD:
      case ir::Op::SHRINK:
      case ir::Op::FLIP:
      case ir::Op::CONTIGUOUS:
      case ir::Op::DETACH: e = E(0); break;
      default:
        e = std::all_of(s.begin(), s.end(), [&](size_t k) { return err[k] == 0; }) && u == 0 ? 0 : INFINITY;
    }
    err[i] = std::isnan(e) ? INFINITY : e;
  }
  std::vector<double> out;
  for (const auto& r : roots) out.push_back(err[index[r.get()]]);
  return out;
}

}  // namespace kiln::fuzz
