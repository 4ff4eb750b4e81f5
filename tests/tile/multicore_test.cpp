// Tile programs across cores of a 2D grid: a block multicast along each grid row, and a barrier
// built from remote semaphore increments and a multicast semaphore set.
#include "example_kernels.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
using namespace kiln::tile_examples;

namespace {

using tile::Grid;
using tile::Program;

TEST(TileMulticast, BlockAlongGridRows) {
  // a grid of 2 rows x 3 columns of cores, one output tile each
  Tensor a = tile_input({64, 96}, 61), b = tile_input({64, 32}, 62);
  Program p("row_multicast", kRowMulticast, Grid::grid2d(2, 3));
  p.input("a", a).input("b", b).output("y", {64, 96}, DType::F32);
  p.cb("a_cb", 1, 1, DType::F32).cb("b_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  p.run();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> want(av.size());
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 96; j++) want[i * 96 + j] = av[i * 96 + j] + bv[i * 32 + j % 32];
  expect_near_all(p.result("y"), want, 0, 1e-6);
}

TEST(TileSemaphore, BarrierWithRemoteIncrementAndMulticastSet) {
  Tensor x = tile_input({96, 96}, 63);  // a 3 x 3 grid: more cores than the CI machine has threads
  Program p("barrier", kBarrier, Grid::grid2d(3, 3));
  p.input("x", x).output("y", {96, 96}, DType::F32).semaphore("arrived").semaphore("go");
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  p.run();
  auto xv = x.to_vector<float>();
  for (int i = 0; i < 96; i++)
    for (int j = 0; j < 96; j++) xv[i * 96 + j] += (i / 32) * 3 + j / 32;
  expect_near_all(p.result("y"), xv, 0, 1e-6);
}

// After the one-step barrier every core reads what the next core wrote before it.
TEST(TileSemaphore, OneStepBarrierWithMulticastIncrement) {
  Tensor x = tile_input({96, 96}, 65);
  Program p = exchange_program(x);
  p.run();
  auto xv = x.to_vector<float>();
  std::vector<float> want(xv.size());
  for (int i = 0; i < 96; i++)
    for (int j = 0; j < 96; j++) {
      const int next = ((i / 32) * 3 + j / 32 + 1) % 9, ni = (next / 3) * 32 + i % 32,
                nj = (next % 3) * 32 + j % 32;
      want[i * 96 + j] = xv[ni * 96 + nj] + next;
    }
  expect_near_all(p.result("y"), want, 0, 1e-6);
}

}  // namespace
}  // namespace kiln::testing
