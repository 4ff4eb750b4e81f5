// Tile programs, elementwise: the shipped add kernel split over cores by rows and by columns, bf16,
// idle cores, unaligned shapes (padded tiles and element-indexed accessors), program caching.
#include "example_kernels.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
using namespace kiln::tile_examples;

namespace {

using tile::Grid;
using tile::Program;

std::vector<float> add_ref(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); i++) x[i] += y[i];
  return x;
}

TEST(TileWorkSplit, SplitsEvenlyAndLeavesExtraCoresIdle) {
  auto w = tile::split_work(10, 4);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].start, 0);
  EXPECT_EQ(w[0].count, 3);
  EXPECT_EQ(w[1].start, 3);
  EXPECT_EQ(w[1].count, 3);
  EXPECT_EQ(w[2].start, 6);
  EXPECT_EQ(w[2].count, 2);
  EXPECT_EQ(w[3].start, 8);
  EXPECT_EQ(w[3].count, 2);
  auto idle = tile::split_work(3, 8);
  for (int c = 3; c < 8; c++) EXPECT_EQ(idle[c].count, 0);
  EXPECT_EQ(idle[2].start + idle[2].count, 3);
}

TEST(TileEltwise, AddSplitByRows) {
  Tensor a = tile_input({128, 96}, 1), b = tile_input({128, 96}, 2);
  Program p = add_program(a, b, 4, 1, 1);
  for (int c = 0; c < 4; c++) p.set_runtime_args(c, {c, 1, 0, 3});  // one tile row each
  p.run();
  expect_near_all(p.result("y"), add_ref(a, b), 0, 1e-6);
}

TEST(TileEltwise, AddSplitByColumnsWithTallBlocks) {
  Tensor a = tile_input({128, 96}, 3), b = tile_input({128, 96}, 4);
  Program p = add_program(a, b, 3, 2, 1);
  for (int c = 0; c < 3; c++) p.set_runtime_args(c, {0, 4, c, 1});  // one tile column each
  p.run();
  expect_near_all(p.result("y"), add_ref(a, b), 0, 1e-6);
}

TEST(TileEltwise, AddBf16) {
  Tensor a = tile_input({64, 64}, 5, DType::BF16), b = tile_input({64, 64}, 6, DType::BF16);
  Program p = add_program(a, b, 2, 1, 2, DType::BF16);
  for (int c = 0; c < 2; c++) p.set_runtime_args(c, {c, 1, 0, 2});
  p.run();
  EXPECT_EQ(p.result("y").dtype(), DType::BF16);
  expect_near_all(p.result("y"), add_ref(a, b), 1e-2, 1e-2);
}

TEST(TileEltwise, IdleCoresFromWorkSplit) {
  Tensor a = tile_input({96, 32}, 7), b = tile_input({96, 32}, 8);
  Program p = add_program(a, b, 8, 1, 1);
  auto w = tile::split_work(3, 8);  // 3 tile rows over 8 cores: 5 get nothing
  for (int c = 0; c < 8; c++) p.set_runtime_args(c, {w[c].start, w[c].count, 0, 1});
  p.run();
  expect_near_all(p.result("y"), add_ref(a, b), 0, 1e-6);
}

TEST(TileEltwise, UnalignedShapeThroughPaddedTiles) {
  // 40 x 70 elements = 2 x 3 tiles, the last row and column of tiles partly outside the tensor
  Tensor a = tile_input({40, 70}, 9), b = tile_input({40, 70}, 10);
  Program p = add_program(a, b, 2, 1, 1);
  p.set_runtime_args(0, {0, 1, 0, 3}).set_runtime_args(1, {1, 1, 0, 3});
  p.run();
  expect_near_all(p.result("y"), add_ref(a, b), 0, 1e-6);
}

TEST(TileEltwise, UnalignedShapeThroughElementAccessors) {
  Tensor x = tile_input({50, 70}, 11);
  Program p("scale_elements", kScaleElements, Grid::cores(2));
  p.input("x", x, tile::Indexing::Elements).output("y", {50, 70}, DType::F32, tile::Indexing::Elements);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  p.runtime_args({"row0"}).set_runtime_args(0, {0}).set_runtime_args(1, {32});
  p.run();
  auto want = x.to_vector<float>();
  for (auto& v : want) v = 2 * v + 1;
  expect_near_all(p.result("y"), want, 0, 1e-6);
}

TEST(TileEltwise, SecondLaunchWithNewArgsCompilesNothing) {
  Tensor a = tile_input({64, 64}, 12), b = tile_input({64, 64}, 13);
  Program p = add_program(a, b, 2, 1, 1);
  p.set_runtime_args(0, {0, 1, 0, 2}).set_runtime_args(1, {1, 1, 0, 2});
  p.run();
  int64_t compiles = stats().compiler_invocations, hits = stats().memory_cache_hits;
  Tensor a2 = tile_input({64, 64}, 14);
  p.input("a", a2)
      .set_runtime_args(0, {0, 2, 0, 1})
      .set_runtime_args(1, {0, 2, 1, 1});  // split by columns now
  p.run();
  EXPECT_EQ(stats().compiler_invocations, compiles);
  EXPECT_EQ(stats().memory_cache_hits, hits + 1);
  expect_near_all(p.result("y"), add_ref(a2, b), 0, 1e-6);
  // a changed compile-time arg is a different program
  Program q = add_program(a, b, 2, 1, 2);
  q.set_runtime_args(0, {0, 1, 0, 2}).set_runtime_args(1, {1, 1, 0, 2});
  EXPECT_NE(q.generated_source(), p.generated_source());
}

// A kept program: its tensors released between runs, new ones bound (same dtypes), each run on its
// own tensors; binding what the program does not take is an error naming it.
TEST(TileEltwise, KeptProgramRebindsItsInputs) {
  Tensor a = tile_input({64, 64}, 12), b = tile_input({64, 64}, 13);
  Program p = add_program(a, b, 2, 1, 1);
  p.set_runtime_args(0, {0, 1, 0, 2}).set_runtime_args(1, {1, 1, 0, 2});
  p.run();
  Tensor y = p.result("y");
  p.release();
  EXPECT_EQ(error_of([&] { p.result("y"); }),
            "kiln.tile: program 'eltwise_add': result('y'): no result (the program has not run since it was "
            "declared or released)");
  EXPECT_EQ(error_of([&] { p.run(); }),
            "kiln.tile: program 'eltwise_add': run(): input 'a' is not bound (released; bind it again)");
  Tensor a2 = tile_input({64, 64}, 14), b2 = tile_input({64, 64}, 15);
  p.bind("a", a2).bind("b", b2).run();
  expect_near_all(y, add_ref(a, b), 0, 1e-6);  // the first run's result is its own
  expect_near_all(p.result("y"), add_ref(a2, b2), 0, 1e-6);
  EXPECT_EQ(error_of([&] { p.bind("c", a2); }),
            "kiln.tile: program 'eltwise_add': bind('c'): no input of that name");
  EXPECT_EQ(error_of([&] { p.bind("y", a2); }),
            "kiln.tile: program 'eltwise_add': bind('y'): 'y' is an output, not an input");
  EXPECT_EQ(error_of([&] { p.bind("a", a2.to(DType::BF16)); }),
            "kiln.tile: program 'eltwise_add': bind('a'): a tensor of dtype bf16 for an input declared f32 "
            "(declare it again with input() to change its dtype)");
}

}  // namespace
}  // namespace kiln::testing
