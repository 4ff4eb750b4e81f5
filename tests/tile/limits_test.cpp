// Tile programs at the limits of the machine: core counts beyond kMaxCores are declaration errors,
// and a launch whose cores do not fit in memory is a kiln::Error after which the process goes on.
#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

using tile::Grid;
using tile::Program;

TEST(TileLimits, CoreCountsAreCheckedUpFront) {
  EXPECT_EQ(error_of([] { Grid::cores(65537); }),
            "kiln.tile: Grid::cores(65537): 65537 cores, more than the 65536 a program may have; give each "
            "core more work");
  EXPECT_EQ(
      error_of([] { Grid::grid2d(70000, 70000); }),
      "kiln.tile: Grid::grid2d(70000, 70000): 4900000000 cores, more than the 65536 a program may have; "
      "give each core more work");
  EXPECT_EQ(error_of([] { Grid::grid2d(0, 3); }),
            "kiln.tile: Grid::grid2d(0, 3): need at least one core in each dimension");
  Grid g;  // built by hand, past the factories
  g.cols = 100000;
  EXPECT_EQ(
      error_of([&] { Program("big", "", g); }),
      "kiln.tile: program 'big': a grid of 1 x 100000 cores: 100000 cores, more than the 65536 a program "
      "may have; give each core more work");
  EXPECT_EQ(Grid::cores(65536).size(), 65536);
}

const char* kCopy = R"(
void reader() {
  if (core_index() > 0) return;
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0), xb).wait();
}
void compute() {
  if (core_index() > 0) return;
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb * 2.0f);
}
void writer() {
  if (core_index() > 0) return;
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";

Program copy_program(int cores, const Tensor& x) {
  Program p("copy_on_" + std::to_string(cores), kCopy, Grid::cores(cores));
  p.input("x", x).output("y", {32, 32}, DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return p;
}

// 20000 cores take 15 GB of role stacks: under a 1.5 GB memory limit the launch is a kiln::Error
// (it was std::bad_alloc in a worker thread, and terminate), and a small launch then runs.
TEST(TileLimits, CoresBeyondMemoryAreAnErrorAndTheProcessGoesOn) {
  if (sanitized_build()) GTEST_SKIP() << "sanitizer allocators do not fail under RLIMIT_AS";
  int code = run_with_memory_limit(size_t{3} << 29, [] {
    Tensor x = tile_input({32, 32}, 92);
    Program many = copy_program(20000, x);
    std::string e = error_of([&] { many.run(); });
    if (e.rfind("kiln.tile: out of memory launching 20000 cores of kernel 'copy_on_20000': each core takes 3 "
                "role stacks of 256 KB and 16384 bytes of CBs, ",
                0) != 0) {
      std::fprintf(stderr, "got: %s\n", e.c_str());
      return 1;
    }
    Program one = copy_program(1, x);
    one.run();
    std::vector<float> y = one.result("y").to_vector<float>(), xv = x.to_vector<float>();
    for (size_t i = 0; i < y.size(); i++)
      if (y[i] != 2 * xv[i]) return 2;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1: wrong error; 2: wrong values after it; 99: another exception; 134: aborted";
}

}  // namespace
}  // namespace kiln::testing
