// Several threads at once in the runtime: the program cache (one cache folder, compiled and loaded
// from disk concurrently) and the thread pool (parallel_for from several threads). Run under TSan.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "runtime/cpu/program_cache.h"
#include "runtime/thread_pool.h"

using namespace kiln;
using runtime::KernelFn;
using runtime::KernelSource;

namespace {
constexpr int kThreads = 4;

// out[i] = i * scale for i in [start, end)
KernelSource fill_kernel(int scale) {
  std::string sym = "conc_fill_" + std::to_string(scale);
  return {sym, sym,
          "void " + sym +
              "_call(void** bufs, int64_t start, int64_t end) {\n  float* out = (float*)bufs[0];\n" +
              "  for (int64_t i = start; i < end; i++) out[i] = (float)(i * " + std::to_string(scale) +
              ");\n}\n"};
}

// Each thread loads a kernel all threads share and one of its own, runs both through the pool and
// checks what they wrote.
void load_and_run_everywhere() {
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([t, &wrong] {
      std::vector<KernelFn> fns = runtime::load_programs({fill_kernel(3), fill_kernel(100 + t)});
      for (int k = 0; k < 2; k++) {
        std::vector<float> out(1000, -1);
        void* args[] = {out.data()};
        runtime::parallel_for(1000, [&](int64_t s, int64_t e) { fns[k](args, s, e); });
        float scale = k == 0 ? 3 : 100 + t;
        for (int i = 0; i < 1000; i++) wrong += out[i] != i * scale;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong, 0);
}
}  // namespace

TEST(Concurrent, ThreadsCompileAndLoadFromOneCacheFolder) {
  Settings saved = settings();
  auto dir = std::filesystem::temp_directory_path() / ("kiln_conc_cache_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  settings().cache_dir = dir.string();
  clear_memory_cache();
  load_and_run_everywhere();  // compiled: the shared kernel once, each thread's own
  clear_memory_cache();
  Stats s = stats();
  load_and_run_everywhere();  // as new processes would: from the disk cache only
  EXPECT_EQ(stats().compiler_invocations, s.compiler_invocations);
  settings() = saved;
  clear_memory_cache();
  std::filesystem::remove_all(dir);
}

TEST(Concurrent, ParallelForFromSeveralThreads) {
  std::vector<std::vector<int64_t>> seen(kThreads, std::vector<int64_t>(10000, 0));
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([t, &seen] {
      for (int rep = 0; rep < 20; rep++)
        runtime::parallel_for(10000, [&](int64_t s, int64_t e) {
          for (int64_t i = s; i < e; i++) seen[t][i]++;
        });
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < kThreads; t++)
    for (int64_t i = 0; i < 10000; i++) ASSERT_EQ(seen[t][i], 20) << "thread " << t << ", element " << i;
}
