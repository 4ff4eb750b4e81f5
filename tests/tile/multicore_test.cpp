// Tile programs across cores of a 2D grid: a block multicast along each grid row, and a barrier
// built from remote semaphore increments and a multicast semaphore set.
#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

using tile::Grid;
using tile::Program;

const char* kRowMulticast = R"(
// y tile (r, c) = a tile (r, c) + b tile (r, 0): on each grid row the core at x = 0 reads the b
// tile once and multicasts it to the rest of its row.
void reader() {
  long long r = core_y(), c = core_x();
  auto bb = b_cb.scoped_reserve();
  if (c == 0) {
    dma(b.slice(r, 0), bb).wait();
    if (grid_cols() > 1) mcast(bb, b_cb, CoreRange{1, (int)r, grid_cols(), (int)r + 1}).wait();
  } else {
    mcast_receive(bb).wait();
  }
  auto ab = a_cb.scoped_reserve();
  dma(a.slice(r, c), ab).wait();
}
void compute() {
  auto bb = b_cb.scoped_wait();
  auto ab = a_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(ab + bb);
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_y(), core_x())).wait();
}
)";

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

const char* kBarrier = R"(
// Every core adds its core index to the y tile it owns, after a barrier: each core increments the
// counter of core (0, 0), which waits for all of them and then releases everyone with a multicast.
void reader() {
  arrived.remote_inc(0, 0);
  if (core_x() == 0 && core_y() == 0) {
    arrived.wait(num_cores());
    go.mcast_set(whole_grid(), 1);
  }
  go.wait(1);
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(core_y(), core_x()), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb + (float)core_index());
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_y(), core_x())).wait();
}
)";

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

}  // namespace
}  // namespace kiln::testing
