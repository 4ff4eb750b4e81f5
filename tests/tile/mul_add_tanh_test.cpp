// The fused y = a * b + tanh(c) kernels (c a broadcast row) split over rows and over columns, on
// shapes that are not multiples of 32, 1/3/8 cores, f32 and bf16, against the float64 reference.
#include "tile/kernel_report.h"

namespace kiln::testing {
namespace {

using tile::Split;

void check(Split split, int64_t M, int64_t N, int cores, DType t) {
  Tensor a = tile_input({M, N}, 101, t), b = tile_input({M, N}, 102, t),
         c = tile_input({1, N}, 103, t, -2, 2);
  Tensor y = tile::mul_add_tanh(a, b, c, split, cores);
  EXPECT_EQ(y.dtype(), t);
  EXPECT_EQ(y.shape(), a.shape());
  auto want = tile::ref::mul_add_tanh(ref_values(a), ref_values(b), ref_values(c), M, N);
  std::string name = std::string("mul_add_tanh ") + (split == Split::Rows ? "rows" : "cols") + " " +
                     std::to_string(M) + "x" + std::to_string(N) + " on " + std::to_string(cores);
  report_errors(name, t, y, want, t == DType::F32 ? 1e-6 : 2e-2);
}

TEST(TileMulAddTanh, SplitOverRows) {
  for (int cores : {1, 3, 8}) check(Split::Rows, 70, 100, cores, DType::F32);
  check(Split::Rows, 33, 65, 3, DType::F32);
}

TEST(TileMulAddTanh, SplitOverColumns) {
  for (int cores : {1, 3, 8}) check(Split::Cols, 70, 100, cores, DType::F32);
  check(Split::Cols, 33, 65, 3, DType::F32);
}

TEST(TileMulAddTanh, Bf16) {
  check(Split::Rows, 70, 100, 3, DType::BF16);
  check(Split::Cols, 70, 100, 3, DType::BF16);
}

TEST(TileMulAddTanh, LargerBlocksWhenTheShapeAllows) {
  check(Split::Rows, 96, 256, 3, DType::F32);   // 1 x 4-tile blocks (1 x 8 would not fit the CB budget)
  check(Split::Rows, 96, 256, 3, DType::BF16);  // 1 x 8
  check(Split::Cols, 256, 64, 3, DType::F32);   // 4 x 1
  check(Split::Cols, 224, 64, 3, DType::F32);   // 7 x 1
}

// G1's c is a row of 8192 (a and b 8192 x 8192; G4 also 4096 wide): the row split used 1 x 8-tile f32
// blocks there, 256 KB of CBs per core, over a GPU core's shared memory; blocks are now sized to
// the CB budget. A few rows keep the test fast.
TEST(TileMulAddTanh, BenchmarkRowLengthsWithinTheCBBudget) {
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t N : {768, 4096, 8192}) {
      Tensor a = tile_input({40, N}, 101, t), b = tile_input({40, N}, 102, t), c = tile_input({1, N}, 103, t);
      std::string name = std::string("mul_add_tanh ") + dtype_name(t) + " N=" + std::to_string(N);
      report_cb_bytes(name + " rows", tile::ops::mul_add_tanh_program(a, b, c, Split::Rows, 2), "BC");
      report_cb_bytes(name + " cols", tile::ops::mul_add_tanh_program(a, b, c, Split::Cols, 2), "BR");
      check(Split::Rows, 40, N, 2, t);
    }
  Tensor a = tile_input({8192, 64}, 101), b = tile_input({8192, 64}, 102), c = tile_input({1, 64}, 103);
  report_cb_bytes("mul_add_tanh f32 8192 rows cols", tile::ops::mul_add_tanh_program(a, b, c, Split::Cols, 2),
                  "BR");
}

}  // namespace
}  // namespace kiln::testing
