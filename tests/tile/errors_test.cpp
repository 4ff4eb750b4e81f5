// Tile programs that must fail, each with the exact error: deadlock (with the blocked lines), use
// after pop, compute before the DMA completed, push before the DMA wait, leftover blocks,
// out-of-range slices, slice/block shape mismatch, multicast on a plain core count, CBs too large
// for a core's shared memory on the GPU (checked on the CPU too).
#include "example_kernels.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

using tile::Grid;
using tile::Program;

// A one-core program over a 64x64 input x and output y with 1x1-tile CBs x_cb and y_cb.
std::string run_error(const std::string& name, const std::string& src, Grid grid = Grid::cores(1)) {
  Program p(name, src, grid);
  p.input("x", tile_input({64, 64}, 71)).output("y", {64, 64}, DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return error_of([&] { p.run(); });
}

const char* kWriter = R"(
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";

TEST(TileErrors, DeadlockReportsEveryBlockedOperationWithItsLine) {
  // the reader pushes one block, compute waits for two
  std::string src = std::string(tile_examples::kDeadlock) + kWriter;
  std::string err = run_error("deadlock", src);
  EXPECT_NE(err.find("deadlock in kernel 'deadlock'"), std::string::npos) << err;
  EXPECT_NE(err.find("core 0 compute: wait() on CB 'x_cb' (no block pushed) at deadlock.cpp:" +
                     std::to_string(line_of(src, "BLOCKS"))),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("core 0 writer: wait() on CB 'y_cb'"), std::string::npos) << err;
}

TEST(TileErrors, UseAfterPop) {
  std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.reserve();
  dma(x.slice(0, 0), xb).wait();
  x_cb.push();
}
void compute() {
  auto xb = x_cb.wait();
  x_cb.pop();  // POP
  auto yb = y_cb.scoped_reserve();
  yb.store(xb * 2.0f);  // USE
}
)") + kWriter;
  std::string err = run_error("use_after_pop", src);
  EXPECT_NE(err.find("kernel 'use_after_pop' core 0 compute: block of CB 'x_cb' used after pop() (at "
                     "use_after_pop.cpp:" +
                     std::to_string(line_of(src, "POP")) +
                     ") at use_after_pop.cpp:" + std::to_string(line_of(src, "USE"))),
            std::string::npos)
      << err;
}

TEST(TileErrors, ComputeBeforeDmaCompleted) {
  std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  Transfer t = dma(x.slice(0, 0), xb);  // ISSUE
  xb.store(xb * 2.0f);  // TOO EARLY
  t.wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
)") + kWriter;
  std::string err = run_error("early_read", src);
  EXPECT_NE(
      err.find("block of CB 'x_cb' read before its DMA completed: call .wait() on the transfer issued at "
               "early_read.cpp:" +
               std::to_string(line_of(src, "ISSUE"))),
      std::string::npos)
      << err;
}

TEST(TileErrors, PushBeforeDmaWait) {
  std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.reserve();
  Transfer t = dma(x.slice(0, 0), xb);
  x_cb.push();
  t.wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
)") + kWriter;
  std::string err = run_error("early_push", src);
  EXPECT_NE(err.find("push() on CB 'x_cb' of a block whose DMA was not waited"), std::string::npos) << err;
}

// A scoped block pushes when its scope ends; C++ gives no position for that, so the message names the
// end of the scope of the block and the line that took it (not that line alone, which did nothing wrong).
TEST(TileErrors, ScopedBlockErrorsSayTheEndOfItsScope) {
  std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();  // TAKEN
  Transfer t = dma(x.slice(0, 0), xb);  // ISSUE
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
)") + kWriter;
  std::string err = run_error("scope_end", src);
  EXPECT_NE(
      err.find("core 0 reader: push() on CB 'x_cb' of a block whose DMA was not waited: call .wait() on "
               "the transfer issued at scope_end.cpp:" +
               std::to_string(line_of(src, "ISSUE")) +
               " first at the end of the scope of the block taken at scope_end.cpp:" +
               std::to_string(line_of(src, "TAKEN"))),
      std::string::npos)
      << err;
}

TEST(TileErrors, BlockLeftReservedAtKernelEnd) {
  std::string src = R"(
void reader() {
  auto xb = x_cb.reserve();  // NEVER PUSHED
  dma(x.slice(0, 0), xb).wait();
}
void compute() {}
void writer() {}
)";
  std::string err = run_error("leftover", src);
  EXPECT_NE(err.find("kernel 'leftover' core 0 ended with a block of CB 'x_cb' reserved at leftover.cpp:" +
                     std::to_string(line_of(src, "NEVER PUSHED")) + " and never pushed"),
            std::string::npos)
      << err;
}

TEST(TileErrors, SliceOutOfRangeAndShapeMismatch) {
  std::string out_of_range = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(2, 0), xb).wait();
}
void compute() {}
void writer() {}
)");
  std::string err = run_error("out_of_range", out_of_range);
  EXPECT_NE(err.find("tensor slice out of range: tiles 2..3 x 0..1 tiles of tensor 'x' (2x2 tiles)"),
            std::string::npos)
      << err;
  std::string mismatch = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0, 2, 2), xb).wait();
}
void compute() {}
void writer() {}
)");
  err = run_error("mismatch", mismatch);
  EXPECT_NE(err.find("dma between a slice of 2x2 tiles of tensor 'x' and a block of 1x1 tiles of CB 'x_cb': "
                     "shapes must match (a smaller piece, such as the last of an uneven split, needs an "
                     "element-indexed tensor: Indexing::Elements)"),
            std::string::npos)
      << err;
}

// Rows, columns and sizes near INT64_MAX: row + rows would wrap negative and pass a range check
// written as `row + rows > R`, and the DMA would then read or write far outside the tensor.
TEST(TileErrors, HugeSliceValuesAreOutOfRangeNotWrapped) {
  const std::string max = "9223372036854775807LL";
  auto tile_read = [&](const std::string& slice) {
    return "void reader() {\n  auto xb = x_cb.scoped_reserve();\n  dma(x.slice(" + slice +
           "), xb).wait();  // BAD\n}\nvoid compute() {}\nvoid writer() {}\n";
  };
  std::string src = tile_read(max + ", 0");
  std::string err = run_error("huge_row", src);
  EXPECT_NE(err.find("kernel 'huge_row' core 0 reader: tensor slice out of range: tiles "
                     "9223372036854775807..9223372036854775807+1 x 0..1 tiles of tensor 'x' (2x2 tiles) at "
                     "huge_row.cpp:" +
                     std::to_string(line_of(src, "BAD"))),
            std::string::npos)
      << err;
  err = run_error("huge_col", tile_read("1, " + max));
  EXPECT_NE(
      err.find("tensor slice out of range: tiles 1..2 x 9223372036854775807..9223372036854775807+1 tiles"),
      std::string::npos)
      << err;
  // a write
  std::string write = R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(9223372036854775806LL, 1)).wait();
}
)";
  err = run_error("huge_write", write);
  EXPECT_NE(err.find("kernel 'huge_write' core 0 writer: tensor slice out of range: tiles "
                     "9223372036854775806..9223372036854775807 x 1..2 tiles of tensor 'y'"),
            std::string::npos)
      << err;
  // element-indexed: the size fits the block, the start does not fit the tensor
  for (std::string slice :
       {max + ", 0, 32, 32", "0, " + max + ", 1, 1", std::string("9223372036854775800LL, 0, 8, 1")}) {
    Program p("huge_elements", tile_read(slice), Grid::cores(1));
    p.input("x", tile_input({64, 64}, 71), tile::Indexing::Elements).output("y", {64, 64}, DType::F32);
    p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
    err = error_of([&] { p.run(); });
    EXPECT_NE(err.find("core 0 reader: tensor slice out of range: elements "), std::string::npos)
        << slice << err;
    EXPECT_NE(err.find("elements of tensor 'x' (64x64 elements)"), std::string::npos) << slice << err;
  }
  // a remote increment of core x = INT_MAX: its range x .. x + 1 must not wrap
  std::string remote = R"(
void reader() { s.remote_inc(2147483647, 0); }
void compute() {}
void writer() {}
)";
  Program p("huge_core", remote, Grid::grid2d(1, 2));
  p.semaphore("s");
  err = error_of([&] { p.run(); });
  EXPECT_NE(err.find("core range x 2147483647..2147483648, y 0..1 is empty or outside the 1x2 grid"),
            std::string::npos)
      << err;
}

// Output shapes whose byte count would wrap, and negative dimensions, are declaration errors.
TEST(TileErrors, OutputShapesThatCannotBeAllocatedAreRejected) {
  Program p("shapes", "", Grid::cores(1));
  std::string err = error_of([&] { p.output("y", {int64_t{1} << 40, int64_t{1} << 40}, DType::F32); });
  EXPECT_EQ(
      err,
      "kiln.tile: program 'shapes': output 'y' of shape (1099511627776, 1099511627776) has more bytes than "
      "memory can address");
  err = error_of([&] { p.output("z", {4, -1}, DType::F32); });
  EXPECT_EQ(err, "kiln.tile: program 'shapes': output 'z' has a negative dimension: shape (4, -1)");
}

TEST(TileErrors, MulticastOnPlainCoreCountIsACompileError) {
  std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0), xb).wait();
  mcast(xb, x_cb, CoreRange{0, 0, 2, 1}).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
)") + kWriter;
  std::string err = run_error("mcast_plain", src, Grid::cores(2));
  EXPECT_NE(err.find("kiln.compile: the C++ compiler"), std::string::npos) << err;
  EXPECT_NE(err.find("multicast needs a 2D grid (Grid::grid2d); this program runs on a plain core count"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("mcast_plain.cpp:5"), std::string::npos) << err;  // the line that multicasts
}

TEST(TileErrors, BlockShapeMismatchIsACompileError) {
  std::string src = std::string(R"(
void reader() {}
void compute() {
  auto yb = y_cb.scoped_reserve();
  auto big = z_cb.scoped_wait();
  yb.store(big);
}
void writer() {}
)");
  Program p("shape_mismatch", src, Grid::cores(1));
  p.output("y", {64, 64}, DType::F32).cb("y_cb", 1, 1, DType::F32).cb("z_cb", 2, 2, DType::F32);
  std::string err = error_of([&] { p.run(); });
  EXPECT_NE(err.find("store of an expression whose shape (in tiles) differs from the block's"),
            std::string::npos)
      << err;
}

TEST(TileErrors, ColumnLongerThanItsRowVectorIsACompileError) {
  std::string src = std::string(R"(
void reader() {}
void compute() {
  auto yb = y_cb.scoped_reserve();
  auto v = z_cb.scoped_wait();
  yb.store(bcast_cols(col_of<32, 2>(v)));
}
void writer() {}
)");
  Program p("col_of_too_long", src, Grid::cores(2));
  p.output("y", {64, 64}, DType::F32).cb("y_cb", 2, 2, DType::F32).cb("z_cb", 1, 1, DType::F32);
  std::string err = error_of([&] { p.run(); });
  EXPECT_NE(err.find("col_of<TH, R>: the column is longer than the row vector"), std::string::npos) << err;
}

// The CBs must fit a GPU thread block's shared memory (227 KB on an H100) less the runtime's own
// state; the CPU backend checks the same limit before compiling anything, so CPU CI catches a kernel
// that could not run on the GPU.
TEST(TileErrors, CBsLargerThanSharedMemoryAreRejectedOnTheCpuToo) {
  const char* idle = "void reader() {}\nvoid compute() {}\nvoid writer() {}\n";
  Program p("oversize", idle, Grid::cores(1));
  p.cb("x_cb", 1, 16, DType::F32).cb("w_cb", 1, 16, DType::BF16, 1).cb("y_cb", 4, 4, DType::F32, 3);
  EXPECT_EQ(p.cb_bytes(), 131072 + 32768 + 196608 + 768);
  EXPECT_EQ(Program::cb_bytes_limit(), 232448 - 2048);
  std::string err = error_of([&] { p.run(); });
  EXPECT_EQ(err,
            "kiln.tile: kernel 'oversize': its CBs need 361216 bytes of shared memory per core, over the "
            "limit of 230400 bytes (232448 per thread block on an H100 or H200 less 2048 for the "
            "runtime's own state; the CPU backend checks the GPU's limit too): use smaller blocks or "
            "buffer factors, or stream long rows in chunks\n"
            "  CB 'x_cb': 1x16 tiles f32 x buffer factor 2 = 131072 bytes\n"
            "  CB 'w_cb': 1x16 tiles bf16 x buffer factor 1 = 32768 bytes\n"
            "  CB 'y_cb': 4x4 tiles f32 x buffer factor 3 = 196608 bytes\n"
            "  barriers and counters: 40 bytes per buffer slot x 6 slots + 24 bytes per CB per warp x 3 "
            "CBs x 6 warps, 128-byte aligned = 768 bytes\n"
            "  total 361216 bytes, limit 230400 bytes");
  // 28 f32 tiles, twice, fit (229376 bytes + 256 of barriers and counters); one more bf16 tile does not
  Program fits("fits", idle, Grid::cores(1));
  fits.cb("x_cb", 4, 7, DType::F32);
  EXPECT_EQ(fits.cb_bytes(), 229632);
  EXPECT_EQ(error_of([&] { fits.run(); }), "no error");
  Program over("over", idle, Grid::cores(1));
  over.cb("x_cb", 4, 7, DType::F32).cb("y_cb", 1, 1, DType::BF16, 1);
  EXPECT_EQ(over.cb_bytes(), 231936);
  EXPECT_NE(error_of([&] { over.run(); }).find("its CBs need 231936 bytes"), std::string::npos);
  // a program's own compute warps on the GPU: 24 bytes of counters per CB per warp (16 + 2 warps)
  Program wide("wide", idle, Grid::cores(1));
  wide.gpu_compute_warps(16).cb("x_cb", 4, 7, DType::F32);
  EXPECT_EQ(wide.cb_bytes(), 229376 + 512);
  EXPECT_NE(error_of([&] {
              wide.gpu_compute_warps(3);
            }).find("gpu_compute_warps(3): the compute role takes 1, 2, 4, 8 or 16 warps"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
