// The CPU backend's watchdog and its carrying of failures out of worker threads: a role that polls a
// value nothing changes, a role stuck in kernel code (its thread is left running and ends at its
// next runtime call), and an exception thrown by kernel code, each a kiln::Error of the launch.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "tile/cpu/launch_state.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

using tile::Grid;
using tile::Program;

// KILN_TILE_TIMEOUT_MS (Settings::tile_timeout_ms) for one test.
struct Timeout {
  int before = settings().tile_timeout_ms;
  explicit Timeout(int ms) { settings().tile_timeout_ms = ms; }
  ~Timeout() { settings().tile_timeout_ms = before; }
};

std::string run_error(const std::string& name, const std::string& src) {
  Program p(name, src, Grid::cores(1));
  p.input("x", tile_input({32, 32}, 91)).output("y", {32, 32}, DType::F32).semaphore("flag");
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return error_of([&] { p.run(); });
}

// Threads the watchdog left running end once their role comes back to the runtime.
bool abandoned_threads_end() {
  for (int i = 0; i < 600 && tile::cpu::abandoned_threads_running() > 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return tile::cpu::abandoned_threads_running() == 0;
}

TEST(TileWatchdog, RolePollingAValueNothingChangesIsReported) {
  Timeout t(200);
  std::string src = R"(
void reader() {}
void writer() {}
void compute() {
  while (flag.value() == 0) {}  // SPIN
}
)";
  std::string err = run_error("spin_value", src);
  EXPECT_EQ(
      err.rfind("kiln.tile: no progress in kernel 'spin_value' for 200 ms (KILN_TILE_TIMEOUT_MS sets the "
                "limit): a role runs kernel code that never returns to the runtime, or polls a value "
                "nothing changes:\n  core 0 compute: running kernel code; its last runtime call was "
                "value() of semaphore 'flag' at spin_value.cpp:" +
                    std::to_string(line_of(src, "SPIN")),
                0),
      0u)
      << err;
  EXPECT_TRUE(abandoned_threads_end());
  // the next launch runs as usual
  EXPECT_EQ(run_error("fine", "void reader() {}\nvoid writer() {}\nvoid compute() { flag.inc(); }\n"),
            "no error");
}

TEST(TileWatchdog, RoleStuckInKernelCodeIsReportedAndItsThreadLeftRunning) {
  Timeout t(200);
  std::string src = R"(#include <chrono>
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();  // LAST CALL
  // kernel code that does not come back to the runtime for a second
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < end) {}
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
void writer() {
  auto yb = y_cb.scoped_wait();  // BLOCKED
  dma(yb, y.slice(0, 0)).wait();
}
)";
  std::string err = run_error("spin_code", src);
  EXPECT_EQ(err.rfind("kiln.tile: no progress in kernel 'spin_code' for 200 ms", 0), 0u) << err;
  EXPECT_NE(err.find("\n  core 0 writer: wait() on CB 'y_cb' (no block pushed) at spin_code.cpp:" +
                     std::to_string(line_of(src, "BLOCKED"))),
            std::string::npos)
      << err;
  EXPECT_NE(
      err.find("\n  core 0 compute: running kernel code; its last runtime call was wait() on CB 'x_cb' at "
               "spin_code.cpp:" +
               std::to_string(line_of(src, "LAST CALL"))),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("(1 worker thread(s) in kernel code were left running, since kernel code cannot be "
                     "interrupted safely; they keep this launch's memory for the rest of the process and are "
                     "free again once their role makes a runtime call)"),
            std::string::npos)
      << err;
  // the stuck role comes back to the runtime after its second, finds the launch failed and ends
  EXPECT_TRUE(abandoned_threads_end());
}

TEST(TileWatchdog, ExceptionFromKernelCodeIsAnErrorOfTheLaunch) {
  std::string src = R"(#include <stdexcept>
void reader() { throw std::runtime_error("boom"); }
void compute() {}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";
  EXPECT_EQ(run_error("throws", src), "kiln.tile: kernel 'throws' core 0 reader threw an exception: boom");
}

}  // namespace
}  // namespace kiln::testing
