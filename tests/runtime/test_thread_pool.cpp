// The runtime's thread pool at its limits: KILN_THREADS values out of range or not numbers, a pool
// whose threads the system refuses (under a memory limit), and exceptions thrown in its chunks.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "helpers.h"
#include "ir/settings.h"
#include "runtime/thread_pool.h"

namespace kiln::testing {
namespace {

std::string setting_error(const char* text) {
  return error_of([&] { runtime::threads_setting(text); });
}

TEST(ThreadPool, KilnThreadsIsAWholeNumberInRange) {
  const int most = ir::max_threads();
  EXPECT_GE(most, 4);
  EXPECT_LE(most, 1024);
  const int hardware = runtime::threads_setting(nullptr);
  EXPECT_GE(hardware, 1);
  EXPECT_EQ(runtime::threads_setting(""), hardware);
  EXPECT_EQ(runtime::threads_setting("1"), 1);
  EXPECT_EQ(runtime::threads_setting(std::to_string(most).c_str()), most);
  // the settings table's message, the same as for the variable at startup
  const std::string range =
      " is not a valid setting: expected an integer from 1 to " + std::to_string(most) + " (";
  for (const std::string& bad : std::vector<std::string>{"3000", "100000", "0", "-2", "abc", "12abc", " ",
                                                         "99999999999999999999", std::to_string(most + 1)}) {
    std::string e = setting_error(bad.c_str());
    EXPECT_EQ(e.rfind("kiln: KILN_THREADS=" + bad + range, 0), 0u) << bad << ": " << e;
  }
}

// The system refuses the pool's threads (their stacks do not fit a memory limit): the threads
// already started are stopped and joined, and the constructor throws (it used to destroy the
// condition variable they waited on, and hang).
TEST(ThreadPool, ThreadsTheSystemRefusesAreAnErrorNotAHang) {
  if (sanitized_build()) GTEST_SKIP() << "sanitizer allocators do not fail under RLIMIT_AS";
  int code = run_with_memory_limit(
      size_t{40} << 20,
      [] {
        // 8 MB of stack a thread: a few start, then one fails
        std::string e = error_of([] { runtime::ThreadPool p(64); });
        bool ok = e.rfind("kiln: cannot start the thread pool's 64 threads (KILN_THREADS", 0) == 0 &&
                  e.find("failed: ") != std::string::npos;
        if (!ok) std::fprintf(stderr, "got: %s\n", e.c_str());
        return ok ? 0 : 1;
      },
      60);
  EXPECT_EQ(code, 0) << "-1: the child hung; 1: wrong error; 134: aborted";
}

TEST(ThreadPool, AnExceptionInAChunkIsAnErrorInTheCaller) {
  std::atomic<int> ran{0};
  auto throwing = [&](int64_t lo, int64_t hi) {
    ran += static_cast<int>(hi - lo);
    if (lo <= 5 && 5 < hi) throw std::runtime_error("chunk with 5");
  };
  std::string e = error_of([&] { runtime::parallel_for(8, throwing); });
  EXPECT_EQ(e, "kiln: a thread of the runtime's pool (parallel_for) failed: chunk with 5");
  EXPECT_EQ(ran.load(), 8);  // every chunk ran to its end before the error came back
  std::string alloc = error_of([] {
    runtime::parallel_for(4, [](int64_t lo, int64_t) {
      if (lo == 0) throw std::bad_alloc();
    });
  });
  EXPECT_EQ(alloc, "kiln: out of memory in a thread of the runtime's pool (parallel_for)");
  // the pool still works
  std::atomic<int64_t> sum{0};
  runtime::parallel_for(100, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
  // and a kiln::Error passes as it is
  EXPECT_EQ(error_of([] { runtime::parallel_for(3, [](int64_t, int64_t) { throw Error("as thrown"); }); }),
            "as thrown");
}

}  // namespace
}  // namespace kiln::testing
