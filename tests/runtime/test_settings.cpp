// KILN_* settings: parsed strictly from one table (src/ir/settings.cpp); an invalid value is a
// kiln::Error naming the variable, the value and what is allowed; nothing else reads the environment.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "helpers.h"
#include "ir/settings.h"

namespace kiln {
namespace {

using ir::settings_from;

Settings parse(const std::map<std::string, std::string>& env) {
  return settings_from([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string parse_error(const std::map<std::string, std::string>& env) {
  return testing::error_of([&] { parse(env); });
}

TEST(Settings, DefaultsWhenUnsetOrEmpty) {
  Settings s = parse({{"HOME", "/home/u"}});
  EXPECT_EQ(s.threads, 0);  // all cores
  EXPECT_EQ(s.debug, 0);
  EXPECT_EQ(s.device, "cpu");
  EXPECT_TRUE(s.cuda_graph);
  EXPECT_EQ(s.tile_compute_warps, 4);
  EXPECT_EQ(s.tile_trace, -1);
  EXPECT_EQ(s.cache_dir, "/home/u/.cache/kiln");
  EXPECT_EQ(parse({{"KILN_THREADS", ""}, {"KILN_DEBUG", ""}}).threads, 0);  // empty = unset
}

// Unset KILN_CACHE_DIR: the per-user default (runtime/cache_dir.cpp) from the same environment.
TEST(Settings, CacheDirDefaultsToXdgThenHome) {
  EXPECT_EQ(parse({{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}}).cache_dir, "/xdg/kiln");
  EXPECT_EQ(parse({{"KILN_CACHE_DIR", "/c"}, {"XDG_CACHE_HOME", "/xdg"}}).cache_dir, "/c");
}

TEST(Settings, ValidValuesAreRead) {
  Settings s = parse({{"KILN_THREADS", "3"},
                      {"KILN_DEBUG", "2"},
                      {"KILN_NOOPT", "1"},
                      {"KILN_CUDA_GRAPH", "0"},
                      {"KILN_DEVICE", "cuda:1"},
                      {"KILN_LAYERNORM", "tile"},
                      {"KILN_TILE_COMPUTE_WARPS", "8"},
                      {"KILN_TILE_TRACE", "0"},
                      {"KILN_CACHE_DIR", "/tmp/c"},
                      {"KILN_CC", "clang"}});
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.debug, 2);
  EXPECT_TRUE(s.noopt);
  EXPECT_FALSE(s.cuda_graph);
  EXPECT_EQ(s.device, "cuda:1");
  EXPECT_EQ(s.layernorm, "tile");
  EXPECT_EQ(s.tile_compute_warps, 8);
  EXPECT_EQ(s.tile_trace, 0);
  EXPECT_EQ(s.cache_dir, "/tmp/c");
  EXPECT_EQ(s.cc, "clang");
}

// KILN_THREADS=0, -3 and abc used to mean "all cores" and 99999 was taken as is.
TEST(Settings, ThreadsOutOfRangeOrNotANumber) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string cap = std::to_string(std::min(1024, 4 * hw));
  for (std::string v : {"0", "-3", "abc", "99999", "2x", " 4", "4.0"})
    EXPECT_EQ(parse_error({{"KILN_THREADS", v}}),
              "kiln: KILN_THREADS=" + v + " is not a valid setting: expected an integer from 1 to " + cap +
                  " (threads that run CPU kernels; unset: all cores)")
        << v;
  EXPECT_EQ(parse({{"KILN_THREADS", cap}}).threads, std::stoi(cap));
}

TEST(Settings, EveryKindIsStrict) {
  struct Case {
    const char *name, *value, *allowed;
  };
  for (const Case& c :
       {Case{"KILN_DEBUG", "abc", "expected an integer from 0 to 6"},
        Case{"KILN_DEBUG", "7", "expected an integer from 0 to 6"},
        Case{"KILN_NOOPT", "2", "expected 0 or 1"}, Case{"KILN_VALIDATE", "yes", "expected 0 or 1"},
        Case{"KILN_DEVICE", "foo", "expected cpu, cuda, gpu, cuda:<n> or ref"},
        Case{"KILN_DEVICE", "cuda:x", "expected cpu, cuda, gpu, cuda:<n> or ref"},
        Case{"KILN_LAYERNORM", "fast", "expected one of generated, tile"},
        Case{"KILN_TILE_COMPUTE_WARPS", "3", "expected one of 1, 2, 4, 8, 16"},
        Case{"KILN_TILE_TIMEOUT_MS", "0", "expected an integer from 1 to 3600000"},
        Case{"KILN_TILE_TRACE", "-1", "expected an integer from 0 to"}}) {
    std::string e = parse_error({{c.name, c.value}});
    EXPECT_EQ(
        e.rfind(std::string("kiln: ") + c.name + "=" + c.value + " is not a valid setting: " + c.allowed, 0),
        0u)
        << e;
  }
}

TEST(Settings, EveryNameIsDeclaredOnce) {
  std::set<std::string> seen;
  for (const auto& s : ir::setting_specs()) {
    EXPECT_TRUE(seen.insert(s.name).second) << s.name;
    EXPECT_EQ(std::string(s.name).rfind("KILN_", 0), 0u) << s.name;
    EXPECT_EQ(ir::find_setting(s.name), &s);
  }
  EXPECT_EQ(ir::find_setting("KILN_THREAD"), nullptr);
}

// The table is the one place a KILN_* variable is read: no other source asks the environment.
TEST(Settings, NoOtherSourceReadsKilnVariables) {
  namespace fs = std::filesystem;
  const std::regex getenv_kiln(R"((getenv|env)\(\s*"KILN_)");
  for (const char* dir : {"src", "include", "tools", "examples"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(KILN_SOURCE_DIR) / dir)) {
      auto ext = e.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      EXPECT_FALSE(std::regex_search(ss.str(), getenv_kiln)) << e.path();
    }
}

// The README's table of variables names only declared settings.
TEST(Settings, ReadmeNamesOnlyDeclaredSettings) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/README.md");
  std::string line;
  int rows = 0;
  const std::regex row(R"(^\| `(KILN_[A-Z0-9_]+))");
  while (std::getline(f, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    rows++;
    EXPECT_NE(ir::find_setting(m[1]), nullptr) << m[1];
  }
  EXPECT_GT(rows, 5);
}

}  // namespace
}  // namespace kiln
