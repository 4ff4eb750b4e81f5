// frontend::own_copy (src/frontend/tensor_impl.h): a copy in a buffer of its own on the tensor's
// device, what parameters and optimizer state are made from.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "frontend/tensor_impl.h"
#include "helpers.h"
#include "ir/node.h"

namespace kiln::testing {
namespace {

TEST(OwnCopy, EqualValuesGetBuffersOfTheirOwn) {
  Tensor a = frontend::own_copy(zeros({3, 5})), b = frontend::own_copy(zeros({3, 5}));
  ASSERT_EQ(a.node()->op, ir::Op::BUFFER);
  EXPECT_NE(a.node(), b.node());
  EXPECT_NE(a.node()->buffer, b.node()->buffer);
  EXPECT_EQ(a.device(), default_device());
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(15, 0.f));
  EXPECT_FALSE(a.requires_grad());
}

TEST(OwnCopy, AViewIsCopiedInItsOrderAndLaterChangesDoNotReachIt) {
  Tensor x = random_tensor({4, 6}, DType::F32, -1, 1, 1);
  x.requires_grad_();
  Tensor t = frontend::own_copy(x.transpose(0, 1));
  EXPECT_EQ(t.shape(), (Shape{6, 4}));
  EXPECT_EQ(t.to_vector<float>(), x.transpose(0, 1).contiguous().to_vector<float>());
  Tensor y = random_tensor({5}, DType::F32, -1, 1, 3);
  Tensor c = frontend::own_copy(y);
  std::vector<float> before = c.to_vector<float>();
  y.assign_(zeros({5})).realize();
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(5, 0.f));
  EXPECT_EQ(c.to_vector<float>(), before);
  Tensor h = frontend::own_copy(random_tensor({7}, DType::BF16, -1, 1, 2));
  EXPECT_EQ(h.dtype(), DType::BF16);
}

}  // namespace
}  // namespace kiln::testing
