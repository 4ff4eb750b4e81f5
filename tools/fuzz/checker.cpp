// kiln_fuzz's checker: kiln's results against the reference interpreter (forward: the generator's
// error bounds; gradients: the reference on the same gradient graph and float64 finite differences).
#include "checker.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <random>
#include <sstream>

#include "bound.h"
#include "engine/interpreter.h"
#include "generator.h"

namespace kiln::fuzz {

namespace {

constexpr double kSafety = 4;   // tolerance = this many error bounds
constexpr int kFdElements = 3;  // finite-difference checks of single elements, per input

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<double> values_of(const ref::Array& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (int64_t k = 0; k < a.numel(); k++) v[k] = a.at(k);
  return v;
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

// A comparison's verdict: the elements outside their tolerance, described.
struct Verdict {
  int bad = 0;
  double max_error = 0;
  std::string detail;
};

Verdict compare(const std::string& what, const std::vector<double>& got, const Expected& e, bool exact) {
  Verdict v;
  std::ostringstream os;
  for (size_t k = 0; k < e.values.size(); k++) {
    double err = std::fabs(got[k] - e.values[k]);
    bool ok = exact ? got[k] == e.values[k] : err <= e.tol[k];
    if (ok) continue;
    if (std::isnan(err)) err = INFINITY;
    if (v.bad++ < 4)
      os << "  " << what << "[" << k << "]: kiln " << fmt(got[k]) << ", reference " << fmt(e.values[k])
         << ", tolerance " << fmt(exact ? 0 : e.tol[k]) << "\n";
    v.max_error = std::max(v.max_error, err);
  }
  if (v.bad)
    v.detail = what + ": " + std::to_string(v.bad) + " of " + std::to_string(e.values.size()) +
               " elements differ, max error " + fmt(v.max_error) + "\n" + os.str();
  return v;
}

// Forward expectations: the reference values, within kSafety error bounds plus rounding of the result.
std::vector<Expected> forward_expected(const Graph& g, const std::vector<Tensor>& nodes) {
  std::vector<ir::NodeRef> roots;
  for (int o : g.outputs) roots.push_back(nodes[o].node());
  std::vector<ref::Array> want = ref::evaluate(roots, false);
  std::vector<Expected> out;
  for (size_t k = 0; k < roots.size(); k++) {
    Expected e{g.outputs[k], values_of(want[k]), {}};
    double u = unit_roundoff(want[k].dtype), tiny = smallest_normal(want[k].dtype);
    for (double v : e.values) e.tol.push_back(kSafety * g.nodes[e.node].err + 2 * u * std::fabs(v) + tiny);
    out.push_back(std::move(e));
  }
  return out;
}

// Gradient expectations: the reference on the gradient graph, within kSafety error bounds of the
// gradient graph (error_bounds) plus rounding of the result.
std::vector<Expected> gradient_expected(const Graph& g, const std::vector<Tensor>& grads) {
  std::vector<ir::NodeRef> roots;
  for (const Tensor& t : grads) roots.push_back(t.node());
  std::vector<ref::Array> want = ref::evaluate(roots, false);
  std::vector<double> bound = error_bounds(roots);
  std::vector<int> ids = input_ids(g);
  std::vector<Expected> out;
  for (size_t i = 0; i < want.size(); i++) {
    Expected e{ids[i], values_of(want[i]), {}};
    // values below the normal range may underflow to 0 or a subnormal in the kernels
    double u = unit_roundoff(want[i].dtype), tiny = smallest_normal(want[i].dtype);
    for (double v : e.values) e.tol.push_back(kSafety * bound[i] + 2 * u * std::fabs(v) + tiny);
    out.push_back(std::move(e));
  }
  return out;
}

// Damages one element by several tolerances (a bool or integer element by one).
void corrupt(std::vector<double>& got, const Expected& e, bool exact, uint64_t seed) {
  if (got.empty()) return;
  size_t k = mix(seed) % got.size();
  if (exact)
    got[k] = got[k] == 0 ? 1 : got[k] - 1;
  else
    got[k] += std::max(kSafety * e.tol[k], 1e-3 * std::fabs(e.values[k]) + 1e-6);
}

// Central finite differences of the loss in float64 (casts to f64) against kiln's gradients: some
// single elements of each input and one random direction through all of them.
std::string check_finite_differences(const Graph& g, const std::vector<std::vector<double>>& got,
                                     const std::vector<Expected>& want, uint64_t seed) {
  std::vector<int> ids = input_ids(g);
  std::vector<Tensor> x;
  for (int id : ids) x.push_back(make_input(g.nodes[id], true));
  auto loss_at = [&](const std::vector<Tensor>& xs) {
    return ref::evaluate(loss_of(g, build(g, xs, true), true).node(), false).at(0);
  };
  auto moved = [&](size_t i, const std::vector<double>& v) {
    return tensor(v, {static_cast<int64_t>(v.size())}).reshape(g.nodes[ids[i]].ints);
  };
  std::mt19937_64 rng(mix(seed ^ 0xfd));
  std::ostringstream os;
  int bad = 0;
  auto expect = [&](const std::string& what, double kiln, double fd, double tol) {
    double fd_err = 1e-6 * std::max(1.0, std::fabs(fd));
    if (std::fabs(kiln - fd) <= tol + fd_err) return;
    if (bad++ < 4)
      os << "  " << what << ": kiln " << fmt(kiln) << ", finite difference " << fmt(fd) << ", tolerance "
         << fmt(tol + fd_err) << "\n";
  };
  for (size_t i = 0; i < ids.size(); i++) {
    const std::vector<double>& v = g.nodes[ids[i]].values;
    for (int j = 0; j < kFdElements && j < static_cast<int>(v.size()); j++) {
      size_t k = rng() % v.size();
      double h = 1e-6 * std::max(1.0, std::fabs(v[k]));
      std::vector<double> up = v, down = v;
      up[k] += h, down[k] -= h;
      std::vector<Tensor> xu = x, xd = x;
      xu[i] = moved(i, up), xd[i] = moved(i, down);
      double fd = (loss_at(xu) - loss_at(xd)) / (2 * h);
      expect("d loss / d t" + std::to_string(ids[i]) + "[" + std::to_string(k) + "]", got[i][k], fd,
             want[i].tol[k]);
    }
  }
  const double h = 1e-6;
  std::vector<Tensor> xu = x, xd = x;
  double dot = 0, tol = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    std::vector<double> up = g.nodes[ids[i]].values, down = up;
    for (size_t k = 0; k < up.size(); k++) {
      double d = rng() % 2 ? h : -h;
      up[k] += d, down[k] -= d;
      dot += got[i][k] * d / h;
      tol += want[i].tol[k];
    }
    xu[i] = moved(i, up), xd[i] = moved(i, down);
  }
  expect("directional derivative", dot, (loss_at(xu) - loss_at(xd)) / (2 * h), tol);
  if (!bad) return "";
  return "gradients against finite differences: " + std::to_string(bad) + " differ\n" + os.str();
}

}  // namespace

Corruption corruption_of(uint64_t seed) {
  switch (mix(seed) % 10) {
    case 0:
    case 1:
    case 2: return Corruption::Output;
    case 3:
    case 4: return Corruption::Gradient;
    case 5: return Corruption::Crash;
    default: return Corruption::None;
  }
}

std::string describe(uint64_t seed, double grad_fraction) {
  Generated gen = generate(seed, grad_fraction);
  const Graph& g = gen.graph;
  if (!gen.build_error.empty() || g.outputs.empty()) return repro_program(g, seed, {}, {});
  std::vector<Tensor> leaves;
  for (int id : input_ids(g)) leaves.push_back(make_input(g.nodes[id]));
  std::vector<Tensor> nodes = build(g, leaves);
  std::vector<Expected> grads;
  if (g.grad) grads = gradient_expected(g, grad({loss_of(g, nodes)}, leaves));
  return repro_program(g, seed, forward_expected(g, nodes), grads);
}

Result check(uint64_t seed, double grad_fraction, Corruption corruption) {
  Result r;
  Generated gen = generate(seed, grad_fraction);
  const Graph& g = gen.graph;
  r.grad = g.grad;
  if (!gen.build_error.empty()) {
    r.status = Result::Status::Error;
    r.report =
        "kiln::Error while building the graph: " + gen.build_error + "\n" + repro_program(g, seed, {}, {});
    return r;
  }
  if (corruption == Corruption::Gradient && !g.grad) corruption = Corruption::Output;

  std::vector<Tensor> leaves;
  for (int id : input_ids(g)) leaves.push_back(make_input(g.nodes[id]));
  std::vector<Tensor> nodes = build(g, leaves);
  std::vector<Tensor> outs, grads;
  for (int o : g.outputs) outs.push_back(nodes[o]);
  std::vector<Expected> fwd = forward_expected(g, nodes), bwd;
  if (g.grad) {
    grads = grad({loss_of(g, nodes)}, leaves);
    bwd = gradient_expected(g, grads);
  }
  std::vector<std::vector<double>> got, got_grads;
  std::string stage = "realizing the outputs";
  try {
    realize(outs);
    for (const Tensor& t : outs) got.push_back(t.to_vector<double>());
    stage = "realizing the gradients";
    if (g.grad) {
      realize(grads);
      for (const Tensor& t : grads) got_grads.push_back(t.to_vector<double>());
    }
  } catch (const std::exception& e) {
    r.status = Result::Status::Error;
    r.report = std::string(dynamic_cast<const Error*>(&e) ? "kiln::Error" : "exception") + " while " + stage +
               ": " + e.what() + "\n" + repro_program(g, seed, fwd, bwd);
    return r;
  }
  if (corruption == Corruption::Crash) std::raise(SIGSEGV);
  if (corruption == Corruption::Output) corrupt(got[0], fwd[0], !is_float(outs[0].dtype()), seed);
  if (corruption == Corruption::Gradient) corrupt(got_grads[0], bwd[0], false, seed);

  std::string detail;
  for (size_t k = 0; k < outs.size(); k++) {
    Verdict v = compare("t" + std::to_string(g.outputs[k]), got[k], fwd[k], !is_float(outs[k].dtype()));
    detail += v.detail;
    r.max_error = std::max(r.max_error, v.max_error);
  }
  for (size_t k = 0; k < grads.size(); k++) {
    Verdict v = compare("gradient of t" + std::to_string(bwd[k].node), got_grads[k], bwd[k], false);
    detail += v.detail;
    r.max_error = std::max(r.max_error, v.max_error);
  }
  for (const Expected& e : bwd)
    if (!e.tol.empty() && std::isinf(e.tol[0])) r.bounded = false;
  if (g.grad) detail += check_finite_differences(g, got_grads, bwd, seed);
  if (!detail.empty()) {
    r.status = Result::Status::Mismatch;
    r.report = detail + repro_program(g, seed, fwd, bwd);
  }
  return r;
}

}  // namespace kiln::fuzz
