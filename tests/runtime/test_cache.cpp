// The program cache: a second run of the same program loads from disk and invokes no compiler.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "helpers.h"
#include "runtime/program_cache.h"

using namespace kiln;
using kiln::testing::TempCache;

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  pclose(f);
  return out;
}
}  // namespace

TEST(ProgramCache, SecondRunHitsDiskAndCompilesNothing) {
  TempCache c("kiln_cache_test_");
  Tensor x = arange(0.0, 64.0).reshape({8, 8});
  Stats s0 = stats();
  EXPECT_EQ((x * 3 + 1).sum(1).to_vector<float>()[0], 3 * 28 + 8);
  EXPECT_EQ(stats().compiler_invocations - s0.compiler_invocations, 1);  // one call for the whole schedule

  clear_memory_cache();  // as a new process would: only the disk cache is left
  Stats s1 = stats();
  Tensor y = arange(0.0, 64.0).reshape({8, 8});
  EXPECT_EQ((y * 3 + 1).sum(1).to_vector<float>()[0], 3 * 28 + 8);
  EXPECT_EQ(stats().compiler_invocations - s1.compiler_invocations, 0);
  EXPECT_GE(stats().disk_cache_hits - s1.disk_cache_hits, 1);

  Stats s2 = stats();  // same process again: from memory
  Tensor z = arange(0.0, 64.0).reshape({8, 8});
  (z * 3 + 1).sum(1).realize();
  EXPECT_EQ(stats().compiler_invocations - s2.compiler_invocations, 0);
  EXPECT_GE(stats().memory_cache_hits - s2.memory_cache_hits, 1);
}

TEST(ProgramCache, SecondProcessInvokesNoCompiler) {
  TempCache c("kiln_cache_proc_");
  std::string cmd =
      "KILN_DEBUG=1 KILN_CACHE_DIR=" + c.dir.string() + " " KILN_BINARY_DIR "/examples/dot_product 2>&1";
  std::string first = run(cmd), second = run(cmd);
  EXPECT_NE(first.find("1 compiled"), std::string::npos) << first;
  EXPECT_NE(second.find("1 from disk, 0 compiled"), std::string::npos) << second;
  EXPECT_NE(second.find("11"), std::string::npos) << second;
}

TEST(ProgramCache, ManyKernelsCompileInOneCall) {
  TempCache c("kiln_cache_batch_");
  Tensor x = arange(0.0, 12.0).reshape({3, 4});
  Tensor a = x.sum(1, true), b = x.max(0, true);
  Stats s0 = stats();
  realize({x - a, x * b, (x + 7).sum()});
  EXPECT_EQ(stats().compiler_invocations - s0.compiler_invocations, 1);
  EXPECT_GE(stats().kernels_compiled - s0.kernels_compiled, 4);
}

// Many distinct kernels compile in groups side by side (one translation unit each, at most one per
// hardware thread), a symbol's duplicates in one group; every kernel still computes its value.
TEST(ProgramCache, ManyKernelsCompileInParallelGroups) {
  std::vector<runtime::KernelSource> ks;
  std::vector<size_t> missing;
  for (int i = 0; i < 40; i++) {
    ks.push_back({"k" + std::to_string(i), "s" + std::to_string(i % 30), std::string(10 + i, 'x')});
    missing.push_back(static_cast<size_t>(i));
  }
  auto groups = runtime::compile_groups(ks, missing);
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(groups.size(), std::min<size_t>(threads, 4));  // 30 symbols: 8 a group
  std::vector<int> seen(40, 0);
  std::map<std::string, size_t> group_of;
  for (size_t g = 0; g < groups.size(); g++) {
    EXPECT_TRUE(std::is_sorted(groups[g].begin(), groups[g].end()));
    for (size_t i : groups[g]) {
      seen[i]++;
      auto [it, added] = group_of.emplace(ks[i].symbol, g);
      EXPECT_EQ(it->second, g) << ks[i].symbol << " split over two groups";
    }
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(runtime::compile_groups(ks, {0, 1, 2}).size(), 1u);  // a few: one call

  TempCache c("kiln_cache_parallel_");
  std::vector<Tensor> outs;
  for (int i = 0; i < 24; i++) outs.push_back((arange(0.0, 8.0) * (i + 2) + i).sum());
  Stats s0 = stats();
  realize(outs);
  EXPECT_EQ(stats().compiler_invocations - s0.compiler_invocations,
            static_cast<int64_t>(std::min<size_t>(threads, 3)));
  for (int i = 0; i < 24; i++) EXPECT_EQ(outs[i].item<float>(), 28 * (i + 2) + 8 * i) << i;
}
