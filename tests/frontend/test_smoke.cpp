// First end-to-end checks: a tensor expression is scheduled, compiled and run.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

using namespace kiln;

TEST(Smoke, DotProduct) {
  Tensor a = tensor({1.0f, 2.0f}), b = tensor({3.0f, 4.0f});
  EXPECT_EQ(a.dot(b).item<float>(), 11.0f);
}

TEST(Smoke, ElementwiseAndReduce) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  auto v = (x * 2 + 1).to_vector<float>();
  EXPECT_EQ(v, (std::vector<float>{3, 5, 7, 9, 11, 13}));
  EXPECT_EQ(x.sum(1).to_vector<float>(), (std::vector<float>{6, 15}));
  EXPECT_EQ(x.sum(0).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(x.t().contiguous().to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(x.max().item<float>(), 6.0f);
}
