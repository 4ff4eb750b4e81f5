// The lookup both program caches share (runtime/batch_loader.h), with toy hooks: a "batch file" is
// an entry listing its kernels' symbols, a loaded one the list, a kernel its position in the list.
// The CUDA cache runs the same code with cubins on a GPU; here it runs without one.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "helpers.h"
#include "runtime/batch_loader.h"

namespace kiln::testing {
namespace {

using runtime::Batch;
using runtime::KernelSource;

struct Toy {
  std::unordered_map<std::string, int> memory;
  int builds = 0, opens = 0;
  runtime::BatchSteps<int, std::string> steps() {
    runtime::BatchSteps<int, std::string> s;
    s.tag = "toy";
    s.id = "toy compiler";
    s.index_prefix = "toy_";
    s.batch_suffix = ".toy";
    s.memory_prefix = "0:";
    s.memory = &memory;
    s.open = [this](const std::string& path) -> std::string {
      opens++;
      auto e = runtime::read_entry(path);
      return e ? *e : "";
    };
    s.find = [](const std::string& lib, const std::string& symbol) {  // 1-based position, 0: none
      std::istringstream in(lib);
      std::string w;
      for (int n = 1; in >> w; n++)
        if (w == symbol) return n;
      return 0;
    };
    s.build = [this](const Batch& b, const std::string&) {
      builds++;
      std::string listed;  // the symbols the batch's source defines ("def <symbol>" lines)
      std::istringstream in(b.source);
      for (std::string w; in >> w;)
        if (w == "def" && in >> w) listed += w + " ";
      return listed;
    };
    s.open_built = [](const std::string& path, const std::string& built, const Batch&) {
      runtime::write_entry(path, built);
      return built;
    };
    return s;
  }
};

std::vector<KernelSource> kernels(const std::vector<std::string>& symbols) {
  std::vector<KernelSource> v;
  for (auto& s : symbols) v.push_back({"kernel " + s, s, "def " + s + "\n"});
  return v;
}

TEST(BatchLoader, CompilesMissingKernelsOnceThenFindsThemInMemoryAndOnDisk) {
  TempCache c("kiln_batch_loader_");
  Toy t;
  auto ks = kernels({"a", "b", "a"});
  std::vector<int> first = runtime::load_batched(ks, t.steps());
  EXPECT_EQ(t.builds, 1);
  EXPECT_EQ(first, (std::vector<int>{1, 2, 1}));  // "a" once in the batch
  EXPECT_EQ(t.memory.size(), 2u);
  EXPECT_EQ(t.memory.count("0:" + runtime::hash_hex(
                                      runtime::hash_string("def a\n", runtime::hash_string("toy compiler")))),
            1u);

  Stats s0 = stats();
  EXPECT_EQ(runtime::load_batched(ks, t.steps()), first);  // from memory
  EXPECT_EQ(stats().memory_cache_hits - s0.memory_cache_hits, 3);
  EXPECT_EQ(t.opens, 0);

  Toy fresh;  // another process: through the index files
  EXPECT_EQ(runtime::load_batched(ks, fresh.steps()), first);
  EXPECT_EQ(fresh.builds, 0);
  EXPECT_EQ(fresh.opens, 2);  // the second "a" is in memory by then
}

TEST(BatchLoader, ABadIndexOrBatchFileCompilesAgain) {
  TempCache c("kiln_batch_loader_bad_");
  Toy t;
  auto ks = kernels({"a"});
  runtime::load_batched(ks, t.steps());
  const std::string idx =
      "toy_" + runtime::hash_hex(runtime::hash_string("def a\n", runtime::hash_string("toy compiler")));
  runtime::write_entry((c.dir / (idx + ".idx")).string(), "../elsewhere.toy");  // not a batch file name
  Toy fresh;
  EXPECT_EQ(runtime::load_batched(ks, fresh.steps()), std::vector<int>{1});
  EXPECT_EQ(fresh.builds, 1);
  EXPECT_EQ(fresh.opens, 0);
}

TEST(BatchLoader, AKernelMissingFromItsBatchIsAnError) {
  TempCache c("kiln_batch_loader_missing_");
  Toy t;
  auto s = t.steps();
  s.build = [](const Batch&, const std::string&) { return std::string("other"); };
  try {
    runtime::load_batched(kernels({"a"}), s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("toy: kernel kernel a missing from b_"), std::string::npos)
        << e.what();
  }
}

TEST(BatchLoader, SingleProgramFromMemoryDiskOrCompiler) {
  std::unordered_map<std::string, int> memory;
  int disk = 0, compiled = 0;
  auto load = [&] {
    return runtime::load_single<int>(
        memory, "k", [&] { return disk; }, [&] { return ++compiled; });
  };
  EXPECT_EQ(load(), 1);  // nothing on disk: compiled
  EXPECT_EQ(load(), 1);  // memory
  EXPECT_EQ(compiled, 1);
  memory.clear();
  disk = 7;
  EXPECT_EQ(load(), 7);
  EXPECT_EQ(compiled, 1);
}

}  // namespace
}  // namespace kiln::testing
