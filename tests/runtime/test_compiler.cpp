// The C compiler behind the CPU kernels: the self-test that picks safe flags (or refuses a
// compiler), flags that follow the compiler actually used, and kernels GCC 12 once built wrong.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "runtime/cpu/compiler.h"

using namespace kiln;
using kiln::testing::error_of;
using kiln::testing::expect_values;
using kiln::testing::TempCache;

namespace {
// A compiler that runs the system's cc with `extra` flags after kiln's (the last one wins), in the
// test's cache folder.
std::string wrapper(const TempCache& c, const std::string& name, const std::string& extra) {
  std::filesystem::create_directories(c.dir);
  std::string path = (c.dir / name).string();
  std::ofstream(path) << "#!/bin/sh\nexec cc \"$@\" " << extra << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

bool on_path(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null").c_str()) == 0;
}
}  // namespace

// GCC 12.2 at -O3 vectorized this reverse-stride sum wrong (92 for 78)
TEST(CompilerCheck, FlippedSumIsRight) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; i++) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  EXPECT_TRUE(expect_values(tensor(v, {6, 2}).flip({0, 1}).sum(), {78}));
  EXPECT_TRUE(expect_values(tensor(v, {4, 3}).flip({0}).sum(0), {22, 26, 30}));
}

// cat of a tensor with itself is a masked select per element; with an expand the masked reads
// went out of bounds
TEST(CompilerCheck, CatOfATensorWithItselfIsRight) {
  for (int64_t rows = 1; rows <= 8; rows++) {
    std::vector<float> v(static_cast<size_t>(rows * 2));
    std::vector<double> want;
    for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<float>(i + 1);
    for (int k = 0; k < 2; k++)
      for (float f : v) want.push_back(f);
    Tensor x = tensor(v, {rows, 2});
    EXPECT_TRUE(expect_values(cat({x, x}, 0).reshape({-1}), want)) << rows << " rows";
    Tensor e = x.slice(0, 0, 1).expand({rows, 2});
    std::vector<double> want_e;
    for (int64_t r = 0; r < rows; r++) want_e.insert(want_e.end(), {1, 2});
    want_e.insert(want_e.end(), want.begin(), want.begin() + rows * 2);
    EXPECT_TRUE(expect_values(cat({e, x}, 0).reshape({-1}), want_e)) << rows << " rows";
  }
}

TEST(CompilerCheck, SelfTestResultIsKeptInTheCache) {
  TempCache c("kiln_cc_keep_");
  settings().cc = wrapper(c, "plain-cc", "");  // a compiler this process has not checked yet
  EXPECT_TRUE(expect_values((tensor({1.f, 2.f}, {2}) * 3).sum(), {9}));
  int records = 0;
  for (auto& e : std::filesystem::directory_iterator(c.dir))
    records += e.path().filename().string().rfind("cc_", 0) == 0 && e.path().extension() == ".flags";
  EXPECT_EQ(records, 1);
}

// A compiler that contracts a*b-c into an FMA at -O2 and above fails the canaries there: kiln
// falls back to -O1, where its results are right.
TEST(CompilerCheck, FallsBackToFlagsUnderWhichTheCanariesPass) {
  TempCache c("kiln_cc_fallback_");
  settings().cc = wrapper(c, "contracting-cc", "-ffp-contract=fast");
  std::string id = runtime::compiler_id();
  EXPECT_NE(id.find("-O1"), std::string::npos) << id;
  EXPECT_EQ(id.find("-O3"), std::string::npos) << id;
  EXPECT_TRUE(expect_values((tensor({1.f, 2.f, 3.f}, {3}) * 2 + 1).sum(), {15}));
}

// A compiler wrong only where it may use AVX-512 gets the level that keeps the vectorizer on AVX2.
TEST(CompilerCheck, FallsBackToTheVectorizerWithoutAvx512) {
  TempCache c("kiln_cc_avx2_");
  std::filesystem::create_directories(c.dir);
  std::string path = (c.dir / "avx512-wrong-cc").string();
  std::ofstream(path) << "#!/bin/sh\ncase \"$*\" in *-mno-avx512f*) exec cc \"$@\";; esac\n"
                      << "exec cc \"$@\" -ffp-contract=fast\n";
  chmod(path.c_str(), 0755);
  settings().cc = path;
  std::string id = runtime::compiler_id();
  EXPECT_NE(id.find("-O3"), std::string::npos) << id;
  EXPECT_NE(id.find("-mno-avx512f"), std::string::npos) << id;
  EXPECT_EQ(id.find("-fno-tree-loop-vectorize"), std::string::npos) << id;
  EXPECT_TRUE(expect_values((tensor({1.f, 2.f, 3.f}, {3}) * 2 + 1).sum(), {15}));
}

// where(t0 > t1, t1, t1) with a scalar t1: its gradient sums both masked halves in one reduce;
// GCC 13.3 on AVX-512 (mask registers) dropped the masked-off half (0.287 for 0.205)
TEST(CompilerCheck, GradientThroughBothSidesOfAWhereIsRight) {
  Tensor t0 =
      tensor({1.8893913f, -0.0917208791f, 0.302006274f, -1.9939599f, -0.311814934f, 0.479318917f}, {6});
  Tensor t1 = tensor({-0.750377238f}, {1}).reshape({});
  t1.requires_grad_(true);
  Tensor t3 = t1.reshape({1, 1, 1, 1});
  Tensor t6 = where(t0 > t1, t3, t1).tanh().mean(std::vector<int64_t>{-4, 1, 2, -1}, false);
  Tensor y = (t6 / t3).reshape({1, 1}) * 0.61557286977767944;
  Tensor g = grad({y.sum()}, {t1})[0];
  EXPECT_TRUE(expect_values(g, {0.20544829193020403}, 2e-6));
}

TEST(CompilerCheck, RefusesACompilerThatFailsAtEveryLevel) {
  TempCache c("kiln_cc_refuse_");
  std::string cc = wrapper(c, "broken-cc", "-O2 -ffp-contract=fast");
  settings().cc = cc;
  std::string e = error_of([] { (tensor({1.f}, {1}) + 1).realize(); });
  EXPECT_NE(e.find("canary kernels wrong"), std::string::npos) << e;
  EXPECT_NE(e.find(cc), std::string::npos) << e;
  EXPECT_NE(e.find("KILN_CC"), std::string::npos) << e;
}

// Flags follow the compiler actually used: clang gets none of GCC's own options.
TEST(CompilerCheck, ClangBuildsKernels) {
  if (!on_path("clang")) GTEST_SKIP() << "clang is not installed";
  TempCache c("kiln_cc_clang_");
  settings().cc = "clang";
  std::string id = runtime::compiler_id();
  EXPECT_EQ(id.find("-fno-tree"), std::string::npos) << id;
  EXPECT_NE(id.find("clang"), std::string::npos) << id;
  Tensor x = tensor({1.f, -2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  EXPECT_TRUE(expect_values((x * x).sum(0), {35, 56}));
  EXPECT_TRUE(expect_values(cat({x, x}, 0).flip({0, 1}).sum(), {34}));
}
