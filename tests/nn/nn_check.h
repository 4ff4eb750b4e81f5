// Helpers for the nn tests: error-message checks and module gradient checks through
// Module::set_parameter.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <functional>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln::testing {

template <class Fn>
void expect_error(Fn f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error containing: " << parts.front();
  } catch (const Error& e) {
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// Sets m's parameters, in named_parameters() order, to `values`.
inline void set_parameters(nn::Module& m, const std::vector<Tensor>& values) {
  auto names = m.named_parameters();
  ASSERT_EQ(names.size(), values.size());
  for (size_t i = 0; i < values.size(); i++) m.set_parameter(names[i].first, values[i]);
}

inline std::vector<std::string> parameter_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, t] : m.named_parameters()) out.push_back(n);
  return out;
}

// Gradient check of out = f(inputs..., parameters of m) with respect to the inputs and every
// parameter (m should be f64): the parameters enter as tensors given to set_parameter.
inline void expect_module_gradients(nn::Module& m, const std::vector<Tensor>& inputs,
                                    const std::function<Tensor(const std::vector<Tensor>&)>& f, uint64_t seed,
                                    double rtol = 1e-5, double atol = 1e-6) {
  std::vector<Tensor> all = inputs;
  size_t n_in = inputs.size();
  for (auto& p : m.parameters()) all.push_back(p);
  expect_gradients_match(
      [&](const std::vector<Tensor>& xs) {
        set_parameters(m, std::vector<Tensor>(xs.begin() + static_cast<std::ptrdiff_t>(n_in), xs.end()));
        return f(std::vector<Tensor>(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n_in)));
      },
      all, seed, rtol, atol);
}

// Random f32 (or t) / f64 tensors in [-scale, scale), and equality of two tensors' values.
inline Tensor r(Shape s, uint64_t seed, double scale = 1, DType t = DType::F32) {
  return random_tensor(s, t, -scale, scale, seed);
}
inline Tensor r64(Shape s, uint64_t seed, double scale = 1) { return r(std::move(s), seed, scale, DType::F64); }
inline void expect_same(const Tensor& a, const Tensor& b, double tol = 0) {
  ASSERT_EQ(a.shape(), b.shape());
  expect_values(a, b.to_vector<double>(), tol, tol);
}

}  // namespace kiln::testing
