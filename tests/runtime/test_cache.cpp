// The program cache: a second run of the same program loads from disk and invokes no compiler.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>

#include "helpers.h"

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
