// One-hot sums over an output loop lower to scatter-adds (codegen/scatter_onehot.h): values against
// the float64 reference, the opts by name. On the default device (the CPU, or the GPU under
// KILN_DEVICE=cuda, where the adds are atomic).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "helpers.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::kernel_opts;
using kiln::testing::random_tensor;

TEST(ScatterOnehot, EmbeddingGradientIsAScatterAdd) {
  manual_seed(5);
  // repeated ids (only 7 rows for 96 tokens) add into the same row from many steps
  Tensor idx = randint(0, 7, {3, 32});
  Tensor w = random_tensor({50, 24}, DType::F32, -1, 1, 6).requires_grad_();
  Tensor g = random_tensor({3, 32, 24}, DType::F32, -1, 1, 7);
  (nn::functional::embedding(idx, w) * g).sum().backward();
  Tensor gw = w.grad();
  EXPECT_NE(kernel_opts(gw).find("SCATTER_ONEHOT 50"), std::string::npos) << kernel_opts(gw);
  EXPECT_TRUE(expect_matches_reference(gw, 1e-5, 1e-6));
}

TEST(ScatterOnehot, TiedEmbeddingGradientIsAScatterAddBesideTheMatmul) {
  // GPT's token embedding is also its output layer: the gradient adds a matmul to the one-hot sum,
  // which stays a kernel of its own so that it still scatters
  manual_seed(6);
  nn::GPT model(nn::GPTConfig{.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16});
  model->forward(randint(0, 11, {2, 8}), randint(0, 11, {2, 8})).second.backward();
  Tensor gw = model->wte->weight.grad();
  EXPECT_NE(kernel_opts(gw).find("SCATTER_ONEHOT 11"), std::string::npos) << kernel_opts(gw);
  EXPECT_TRUE(expect_matches_reference(gw, 1e-4, 1e-5));
}

// With a symbolic batch of ids: the lookup folds to a gather and the gradient scatters, with the
// loops over the tokens running to the bound size, at each binding.
TEST(ScatterOnehot, SymbolicBatchFoldsAndScatters) {
  Var B("B", 1, 16);
  Tensor w = random_tensor({50, 24}, DType::F32, -1, 1, 6);
  for (int64_t b : {3, 7}) {
    SCOPED_TRACE("B = " + std::to_string(b));
    manual_seed(static_cast<uint64_t>(b));
    Tensor idx = randint(0, 50, {b, 32}).realize().symbolic(0, B);
    Tensor wg = w.detach().requires_grad_();
    Tensor y = nn::functional::embedding(idx, wg);
    EXPECT_NE(kernel_opts(y).find("FOLD_ONEHOT 50"), std::string::npos) << kernel_opts(y);
    EXPECT_TRUE(expect_matches_reference(y, 1e-6, 1e-6));
    (y * random_tensor({b, 32, 24}, DType::F32, -1, 1, 7).symbolic(0, B)).sum().backward();
    Tensor gw = wg.grad();
    EXPECT_NE(kernel_opts(gw).find("SCATTER_ONEHOT 50"), std::string::npos) << kernel_opts(gw);
    EXPECT_TRUE(expect_matches_reference(gw, 1e-5, 1e-6));
  }
}

TEST(ScatterOnehot, DeterministicSettingKeepsGpuSumsInOrder) {
  // KILN_DETERMINISTIC: the GPU keeps the sum (atomic adds vary in order); the CPU's scatter is in
  // order already (each thread owns its output columns) and stays
  kiln::testing::Deterministic deterministic;
  Tensor idx = randint(0, 7, {40});
  Tensor w = random_tensor({9, 5}, DType::F32, -1, 1, 16).requires_grad_();
  (nn::functional::embedding(idx, w) * 3.0).sum().backward();
  Tensor gw = w.grad();
  bool scatters = kernel_opts(gw).find("SCATTER_ONEHOT") != std::string::npos;
  EXPECT_EQ(scatters, !default_device().is_cuda()) << kernel_opts(gw);
  EXPECT_TRUE(expect_matches_reference(gw, 1e-5, 1e-6));
}

TEST(ScatterOnehot, OneDimensionalSumIntoOneOutputLoop) {
  // out[v] = sum over n of where(idx[n] == v, x[n], 0): the only output loop is v, so the CPU runs
  // the scatter on one thread; ids outside [0, 9) (here -1 and 9) add nothing
  Tensor idx = tensor(std::vector<int64_t>{3, -1, 3, 0, 8, 9, 3, 1, 0, 8}, {10});
  Tensor x = random_tensor({10}, DType::F32, -1, 1, 8);
  Tensor out = where(idx.unsqueeze(-1) == arange(9), x.unsqueeze(-1), Scalar(0.0)).sum(0);
  EXPECT_NE(kernel_opts(out).find("SCATTER_ONEHOT 9"), std::string::npos) << kernel_opts(out);
  std::vector<float> xv = x.to_vector<float>();
  std::vector<double> want(9, 0.0);
  std::vector<int64_t> iv = idx.to_vector<int64_t>();
  for (size_t n = 0; n < iv.size(); n++)
    if (iv[n] >= 0 && iv[n] < 9) want[static_cast<size_t>(iv[n])] += xv[n];
  EXPECT_TRUE(kiln::testing::expect_values(out, want, 1e-5, 1e-6));
}

TEST(ScatterOnehot, ScatterAddAndIndexAddUseIt) {
  Tensor self = random_tensor({6, 5}, DType::F32, -1, 1, 9);
  Tensor src = random_tensor({4, 5}, DType::F32, -1, 1, 10);
  Tensor index = tensor(std::vector<int64_t>{2, 0, 2, 5}, {4});
  Tensor r = self.index_add(0, index, src, 2.0);
  EXPECT_NE(kernel_opts(r).find("SCATTER_ONEHOT"), std::string::npos) << kernel_opts(r);
  EXPECT_TRUE(expect_matches_reference(r, 1e-6, 1e-7));
  Tensor idx2 = tensor(std::vector<int64_t>{1, 0, 1, 1, 0, 2}, {2, 3});
  EXPECT_TRUE(expect_matches_reference(self.scatter_add(1, idx2, src), 1e-6, 1e-7));
  EXPECT_TRUE(
      expect_matches_reference(self.to(DType::F64).scatter_add(0, idx2, src.to(DType::F64)), 1e-12, 1e-12));
}

TEST(ScatterOnehot, ASelectionMaskedByAnotherConditionAddsOnlyWhereItHolds) {
  // the selection's other conjunct (x > 0) is kept in the scatter, evaluated at the selected row
  Tensor idx = tensor(std::vector<int64_t>{4, 1, 4, 2, 0, 4}, {6});
  Tensor x = random_tensor({6, 3}, DType::F32, -1, 1, 11);
  Tensor hit = (idx.unsqueeze(-1) == arange(5)).unsqueeze(-1) & (x.unsqueeze(1) > 0.0);  // (6, 5, 3)
  Tensor out = where(hit, x.unsqueeze(1), Scalar(0.0)).sum(0);
  EXPECT_TRUE(expect_matches_reference(out, 1e-6, 1e-7));
}
