// The linearizer on graphs with much sharing: walks visit each shared node once.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;

// tanh reads its input several times: twelve nested are a DAG of a few hundred nodes but of
// billions of paths, which hoisting values out of inner loops once walked one by one
TEST(Linearize, DeeplySharedChainsLinearizeQuickly) {
  Tensor x = random_tensor({3, 2, 7}, DType::F32, -2, 2, 1), s = random_tensor({2, 1}, DType::F32, -2, 2, 2);
  Tensor t = x / (s * s + 0.5);
  for (int i = 0; i < 12; i++) t = t.tanh();
  EXPECT_TRUE(expect_matches_reference(t / t.sigmoid(), 1e-5, 1e-6));
}
