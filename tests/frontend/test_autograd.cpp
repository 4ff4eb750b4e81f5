// Autograd: backward() into leaves, the functional kiln::grad, detach/NoGradGuard, higher-order
// gradients, gradients through realized intermediates, and misuse errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_values;

namespace {
Tensor leaf(std::vector<double> v, Shape s = {}) {
  Tensor t = tensor(v, s.empty() ? Shape{static_cast<int64_t>(v.size())} : s);
  t.requires_grad_();
  return t;
}
template <class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Autograd, BackwardFillsLeafGradients) {
  Tensor x = leaf({1, 2, 3}), w = leaf({0.5, -1, 2});
  Tensor loss = (x * x * w).sum();
  loss.backward();
  expect_values(x.grad(), {1, -4, 12}, 1e-12);  // 2 x w
  expect_values(w.grad(), {1, 4, 9}, 1e-12);    // x^2
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_FALSE(loss.is_leaf());
}

TEST(Autograd, GradientsAccumulateUntilZeroed) {
  Tensor x = leaf({1, 2});
  (x * 3).sum().backward();
  (x * x).sum().backward();
  expect_values(x.grad(), {5, 7}, 1e-12);
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  (x * 2).sum().backward();
  expect_values(x.grad(), {2, 2}, 1e-12);
}

TEST(Autograd, BackwardThroughRealizedIntermediates) {
  Tensor x = leaf({1, -2, 3, -4}, {2, 2}), w = leaf({0.5, 1, -1, 2}, {2, 2});
  Tensor h = x.matmul(w).relu();
  h.realize();  // forward values computed; the graph stays for backward
  EXPECT_TRUE(h.requires_grad());
  Tensor loss = (h * h).sum();
  loss.backward();
  // reference: same computation without the intermediate realize
  Tensor x2 = tensor(x.to_vector<double>(), {2, 2}), w2 = tensor(w.to_vector<double>(), {2, 2});
  auto g = grad({(x2.matmul(w2).relu().pow(2)).sum()}, {x2, w2});
  expect_values(x.grad(), g[0].to_vector<double>(), 1e-12);
  expect_values(w.grad(), g[1].to_vector<double>(), 1e-12);
}

TEST(Autograd, FunctionalGradWithGradOutputs) {
  Tensor x = tensor(std::vector<double>{1, 2, 3});
  Tensor y = x.exp();
  auto g = grad({y}, {x}, {tensor(std::vector<double>{1, 0, 2})});
  expect_values(g[0], {std::exp(1.0), 0, 2 * std::exp(3.0)}, 1e-12);
  // several outputs: gradients add
  auto g2 = grad({x.sum(), (x * x).sum()}, {x});
  expect_values(g2[0], {3, 5, 7}, 1e-12);
  // an unused input gets zeros, or an error when asked
  Tensor z = tensor(std::vector<double>{4});
  expect_values(grad({x.sum()}, {z})[0], {0});
  expect_error([&] { grad({x.sum()}, {z}, {}, false); }, "not used");
}

TEST(Autograd, HigherOrderGradients) {
  Tensor x = tensor(std::vector<double>{0.5, -1.5, 2});
  Tensor y = (x * x * x).sum();
  Tensor dx = grad({y}, {x})[0];            // 3 x^2
  Tensor ddx = grad({dx.sum()}, {x})[0];    // 6 x
  Tensor dddx = grad({ddx.sum()}, {x})[0];  // 6
  expect_values(dx, {0.75, 6.75, 12}, 1e-12);
  expect_values(ddx, {3, -9, 12}, 1e-12);
  expect_values(dddx, {6, 6, 6}, 1e-12);
  // a Hessian-vector product through a nonlinearity: d/dx (grad(sum(tanh(x))) . v)
  Tensor v = tensor(std::vector<double>{1, 2, 3});
  Tensor gt = grad({x.tanh().sum()}, {x})[0];
  Tensor hv = grad({(gt * v).sum()}, {x})[0];
  std::vector<double> want;
  for (int i = 0; i < 3; i++) {
    double xi = std::vector<double>{0.5, -1.5, 2}[i], t = std::tanh(xi);
    want.push_back(-2 * t * (1 - t * t) * (i + 1));
  }
  expect_values(hv, want, 1e-9);
}

TEST(Autograd, DetachAndNoGradStopGradients) {
  Tensor x = leaf({1, 2});
  Tensor y = x.detach() * x;  // d/dx = detached x
  y.sum().backward();
  expect_values(x.grad(), {1, 2}, 1e-12);
  EXPECT_FALSE(x.detach().requires_grad());
  Tensor z;
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    z = x * 5;
    EXPECT_FALSE(z.requires_grad());
  }
  EXPECT_TRUE(grad_enabled());
  expect_values(z, {5, 10});
  EXPECT_TRUE((z * x).requires_grad());  // x still requires grad outside the guard
  x.zero_grad();
  (z * x).sum().backward();
  expect_values(x.grad(), {5, 10}, 1e-12);
}

TEST(Autograd, GradientDtypesFollowTheirTensors) {
  Tensor x = zeros({3}).requires_grad_();
  Tensor y = (x.to(DType::F64) * 2).sum();
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::F32);
  expect_values(x.grad(), {2, 2, 2});
}

TEST(Autograd, Errors) {
  Tensor x = leaf({1, 2});
  expect_error([&] { (x * 2).backward(); }, "grad_output can be implied only for tensors with one element");
  expect_error([&] { tensor(std::vector<double>{1}).sum().backward(); }, "does not require grad");
  expect_error(
      [&] {
        (x * 2).sum().backward(tensor(std::vector<double>{1, 2}));
      },
      "grad_output of shape (2,)");
  expect_error(
      [&] {
        Tensor t = arange(3);
        t.requires_grad_();
      },
      "only floating point tensors");
  expect_error(
      [&] {
        Tensor t = x * 2;
        t.requires_grad_();
      },
      "only leaf tensors");
  expect_error([&] { (x < 1.0).to(DType::F64).sum().backward(); }, "does not require grad");
  expect_error([&] { grad({x * 2}, {x}); }, "grad_outputs are needed");
}

TEST(Autograd, AssignKeepsLeavesAndSharesWithHandles) {
  Tensor w = leaf({1, 2, 3});
  Tensor alias = w;  // another handle to the same tensor
  for (int step = 0; step < 3; step++) {
    w.zero_grad();
    (w * w).sum().backward();
    w.assign_(w - w.grad() * 0.25);  // w -= 0.5 w
    realize({w});
  }
  expect_values(alias, {0.125, 0.25, 0.375}, 1e-12);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  w.zero_grad();
  (w * 2).sum().backward();
  expect_values(w.grad(), {2, 2, 2}, 1e-12);
  expect_error([&] { w.assign_(tensor(std::vector<double>{1})); }, "assign_");
}

TEST(Autograd, LeavesWithEqualValuesKeepTheirOwnGradients) {
  Tensor a = tensor(std::vector<double>{1, 2}), b = tensor(std::vector<double>{3, 4});
  a.requires_grad_();
  b.requires_grad_();
  a.assign_(zeros({2}, {.dtype = DType::F64}));
  b.assign_(zeros({2}, {.dtype = DType::F64}));
  realize({a, b});  // equal values: one graph node, but two leaves
  (a * 2 + b).sum().backward();
  expect_values(a.grad(), {2, 2}, 1e-12);
  expect_values(b.grad(), {1, 1}, 1e-12);
  Tensor c = zeros({3}, {.dtype = DType::F64}), d = zeros({3}, {.dtype = DType::F64});
  c.requires_grad_();
  d.requires_grad_();
  (c * 3 - d).sum().backward();
  expect_values(c.grad(), {3, 3, 3}, 1e-12);
  expect_values(d.grad(), {-1, -1, -1}, 1e-12);
}
