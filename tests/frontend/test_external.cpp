// External ops (src/frontend/external.h): a value computed outside the compiler (here the tile
// mul_add_tanh kernel) joins autograd through its callback; without gradients it is the value.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/tile_ops.h>

#include <cmath>

#include "frontend/external.h"
#include "helpers.h"

namespace kiln::testing {
namespace {

TEST(External, GradientsFlowThroughTheCallback) {
  Tensor a = random_tensor({40, 64}, DType::F32, -1, 1, 1), b = random_tensor({40, 64}, DType::F32, -1, 1, 2);
  Tensor c = random_tensor({1, 64}, DType::F32, -1, 1, 3);
  a.requires_grad_();
  Tensor value = tile::mul_add_tanh(a.detach(), b, c, tile::Split::Rows, 2);
  int calls = 0;
  Tensor y = frontend::external({a}, value, [&](const Tensor& g) {
    calls++;
    return std::vector<std::optional<Tensor>>{g * b};  // d(a * b + tanh(c)) / da
  });
  EXPECT_NE(y.node(), value.node());
  std::vector<Tensor> g = grad({(y * 3).sum()}, {a});
  EXPECT_EQ(calls, 1);
  std::vector<double> got = g[0].to_vector<double>(), bv = b.to_vector<double>();
  for (size_t i = 0; i < got.size(); i++) ASSERT_NEAR(got[i], 3 * bv[i], 1e-6) << i;
  std::vector<double> yv = y.to_vector<double>(), av = a.to_vector<double>(), cv = c.to_vector<double>();
  for (size_t i = 0; i < yv.size(); i++) ASSERT_NEAR(yv[i], av[i] * bv[i] + std::tanh(cv[i % 64]), 1e-5) << i;
}

TEST(External, WithoutGradientsIsTheValue) {
  Tensor a = random_tensor({4, 32}, DType::F32, -1, 1, 4);
  Tensor y =
      frontend::external({a}, a * 2, [](const Tensor&) { return std::vector<std::optional<Tensor>>{}; });
  EXPECT_FALSE(y.requires_grad());
}

}  // namespace
}  // namespace kiln::testing
