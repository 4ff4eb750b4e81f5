// Batched op checks for the composite-op suites: every case is compared with the reference
// interpreter and with values computed by plain host loops from its inputs; one realize per batch.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln::opcheck {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A realized input on the host: contiguous row-major values.
struct Host {
  Shape shape;
  std::vector<double> v;
  int64_t size(int64_t d) const { return shape[static_cast<size_t>(d < 0 ? d + int64_t(shape.size()) : d)]; }
};

inline int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The flat indices of every line along dim d of shape s (outer-major order).
inline std::vector<std::vector<int64_t>> lines(const Shape& s, int64_t d) {
  if (s.empty()) return {{0}};
  int64_t outer = 1, inner = 1, n = s[d];
  for (int64_t k = 0; k < d; k++) outer *= s[k];
  for (size_t k = static_cast<size_t>(d) + 1; k < s.size(); k++) inner *= s[k];
  std::vector<std::vector<int64_t>> r;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      std::vector<int64_t> l;
      for (int64_t k = 0; k < n; k++) l.push_back((o * n + k) * inner + i);
      r.push_back(l);
    }
  return r;
}

// Multi-index <-> flat index for a shape.
inline std::vector<int64_t> unflat(int64_t f, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t k = int64_t(s.size()) - 1; k >= 0; k--) {
    idx[k] = f % s[k];
    f /= s[k];
  }
  return idx;
}
inline int64_t flat(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (size_t k = 0; k < s.size(); k++) f = f * s[k] + idx[k];
  return f;
}

using Want = std::function<std::vector<double>(const std::vector<Host>&)>;

// Non-contiguous views of random data of shape s: 0 contiguous, 1 transposed (permuted storage),
// 2 strided (every other element of a larger tensor), 3 flipped.
inline Tensor input(const Shape& s, DType t, double lo, double hi, uint64_t seed, int layout = 0) {
  if (s.empty() || numel_of(s) == 0) layout = 0;
  switch (layout) {
    case 1: {
      Shape r(s.rbegin(), s.rend());
      std::vector<int64_t> perm(s.size());
      for (size_t i = 0; i < s.size(); i++) perm[i] = int64_t(s.size() - 1 - i);
      return testing::random_tensor(r, t, lo, hi, seed).permute(perm);
    }
    case 2: {
      Shape b = s;
      b.back() = 2 * s.back();
      return testing::random_tensor(b, t, lo, hi, seed).slice(-1, 1, std::nullopt, 2);
    }
    case 3: {
      std::vector<int64_t> dims(s.size());
      std::iota(dims.begin(), dims.end(), 0);
      return testing::random_tensor(s, t, lo, hi, seed).flip(dims);
    }
    default: return testing::random_tensor(s, t, lo, hi, seed);
  }
}

class Batch {
 public:
  // want == nullptr: reference interpreter only. Float tolerances default per dtype.
  void add(std::string label, Tensor out, std::vector<Tensor> ins, Want want, double rtol = -1,
           double atol = -1) {
    cases_.push_back({std::move(label), out, out.node(), std::move(ins), std::move(want), rtol, atol});
  }
  void run() {
    std::vector<Tensor> all;
    for (auto& c : cases_) {
      all.push_back(c.out);
      for (auto& i : c.ins) all.push_back(i);
    }
    realize(all);
    for (auto& c : cases_) {
      SCOPED_TRACE(c.label);
      testing::Tol tol = testing::default_tol(c.out.dtype(), true);
      double rtol = c.rtol >= 0 ? c.rtol : tol.rtol, atol = c.atol >= 0 ? c.atol : tol.atol;
      testing::expect_matches_reference(c.out, c.graph, rtol, atol);
      if (!c.want) continue;
      std::vector<Host> h;
      for (auto& i : c.ins) h.push_back({i.shape(), i.to_vector<double>()});
      SCOPED_TRACE("host loop oracle");
      testing::expect_values(c.out, c.want(h), rtol, atol);
    }
    cases_.clear();
  }

 private:
  struct Case {
    std::string label;
    Tensor out;
    std::shared_ptr<const ir::Node> graph;
    std::vector<Tensor> ins;
    Want want;
    double rtol, atol;
  };
  std::vector<Case> cases_;
};

// Expects f to throw kiln::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown (expected: " << fragments[0] << ")";
  } catch (const Error& e) {
    std::string m = e.what();
    for (auto& fr : fragments)
      EXPECT_NE(m.find(fr), std::string::npos) << "message: " << m << "\nmissing: " << fr;
  }
}

inline std::string dname(DType t) { return dtype_name(t); }

}  // namespace kiln::opcheck
