// Tile programs across cores of a 2D grid: a block multicast along each grid row, multicasts into a
// wrapped ring, a barrier built from remote semaphore increments and a multicast semaphore set, and
// a read released to another core by a semaphore.
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

// CoreRange{x0, y0, x1, y1} excludes its ends: core 0 increments cores 0 and 1 of a 1 x 3 grid, not
// core 2. The compute role waits on a semaphore and reads one (docs/tile.md, section 6).
TEST(TileSemaphore, CoreRangeExcludesItsEndAndComputeWaits) {
  const char* src = R"(
void reader() {
  if (core_x() == 0) s.mcast_inc(CoreRange{0, 0, 2, 1});
  done.mcast_inc(whole_grid());
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, core_x()), xb).wait();
}
void compute() {
  done.wait(num_cores());  // every reader has signalled, core 0's increment of s before its own
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb + (float)s.value());
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, core_x())).wait();
}
)";
  Tensor x = tile_input({32, 96}, 66);
  Program p("core_range", src, Grid::grid2d(1, 3));
  p.input("x", x).output("y", {32, 96}, DType::F32).semaphore("s").semaphore("done");
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  p.run();
  auto want = x.to_vector<float>();
  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 64; j++) want[i * 96 + j] += 1;  // cores 0 and 1
  expect_near_all(p.result("y"), want, 0, 0);
}

TEST(TileSemaphore, EmptyCoreRangeIsAnError) {
  const char* src = R"(
void reader() { s.mcast_inc(CoreRange{1, 0, 1, 1}); }  // x 1..1: no core
void compute() {}
void writer() {}
)";
  Program p("empty_range", src, Grid::grid2d(1, 2));
  p.semaphore("s");
  std::string err = error_of([&] { p.run(); });
  EXPECT_NE(err.find("core range x 1..1, y 0..1 is empty or outside the 1x2 grid at empty_range.cpp:2"),
            std::string::npos)
      << err;
}

// On a plain core count the compute role signals the writer through a local semaphore.
TEST(TileSemaphore, ComputeSignalsOnAPlainCoreCount) {
  const char* src = R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(core_index(), 0), xb).wait();
}
void compute() {
  {
    auto xb = x_cb.scoped_wait();
    auto yb = y_cb.scoped_reserve();
    yb.store(xb * 3.0f);
  }
  stored.inc();
}
void writer() {
  stored.wait(1);
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_index(), 0)).wait();
}
)";
  Tensor x = tile_input({64, 32}, 67);
  Program p("compute_signals", src, Grid::cores(2));
  p.input("x", x).output("y", {64, 32}, DType::F32).semaphore("stored");
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  p.run();
  auto want = x.to_vector<float>();
  for (auto& v : want) v *= 3;
  expect_near_all(p.result("y"), want, 0, 0);
}

// Two receives pending on one CB after its ring wrapped (slots 1, then 0): payloads fill them in
// the order they were posted, as on the GPU, not in slot order (which delivered 1, 3, 2).
TEST(TileMulticast, ReceivesFillInPostingOrderAfterTheRingWraps) {
  Tensor x = tile_input({96, 32}, 66);
  Program p = multicast_order_program(x);
  p.run();
  expect_near_all(p.result("y"), x.to_vector<float>(), 0, 0);
}

// 64 payloads through a ring of two slots: each lands in order, after its slot was read.
TEST(TileMulticast, AStreamThroughATwoSlotRingArrivesIntact) {
  Tensor x = tile_input({2048, 32}, 68);
  Program p = multicast_stream_program(x);
  p.run();
  expect_near_all(p.result("y"), x.to_vector<float>(), 0, 0);
}

// A read waited before a semaphore signal has read its source: the core the signal releases may
// overwrite it (on the GPU the signal settles the role's reads first).
TEST(TileSemaphore, ReadWaitedBeforeASignalHasReadItsSource) {
  Tensor x = tile_input({64, 125}, 67);
  Program p = read_then_signal_program(x);
  p.run();
  expect_near_all(p.result("y"), std::vector<float>(64 * 125, 0.0f), 0, 0);
  expect_near_all(p.result("stage"), x.to_vector<float>(), 0, 0);
}

}  // namespace
}  // namespace kiln::testing
