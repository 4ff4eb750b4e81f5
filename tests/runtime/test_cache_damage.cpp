// The program cache's files on disk: damaged entries (truncated, garbage, bit-flipped) of CPU and
// tile kernels are compiled again, never loaded; processes sharing one cache stay consistent; an
// unusable cache directory falls back to a private one; the default directory is per user.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "helpers.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "tile/example_kernels.h"
#include "tile/tile_helpers.h"

using namespace kiln;
using kiln::testing::TempCache;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// The cache's entry files (shared objects, index files, compiler records) and their bytes.
std::map<fs::path, std::string> entries(const fs::path& dir) {
  std::map<fs::path, std::string> out;
  for (auto& e : fs::directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".so" || ext == ".idx" || ext == ".flags" || ext == ".cubin"))
      out[e.path()] = read_bytes(e.path());
  }
  return out;
}

// Every entry in `dir` passes its check and no temporary file is left.
void expect_cache_clean(const fs::path& dir) {
  int n = 0;
  for (auto& [p, bytes] : entries(dir)) {
    std::string why;
    EXPECT_TRUE(runtime::unseal_entry(bytes, &why)) << p << ": " << why;
    n++;
  }
  EXPECT_GE(n, 4) << "expected shared objects of CPU and tile kernels, index files and compiler records";
  for (auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// A child process running ProgramCacheChild.* on cache `dir`; its pipe, read by finish().
FILE* start_child(const fs::path& dir) {
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string cmd = "exec env CACHE_DAMAGE_CHILD=1 KILN_DEBUG=1 KILN_CACHE_DIR='" + dir.string() + "' '" +
                    self + "' --gtest_filter='ProgramCacheChild.*' 2>&1";
  return popen(cmd.c_str(), "r");
}

// The child's output; fails the test unless it exited normally with status 0 and its test passed.
std::string finish(FILE* f) {
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  int status = pclose(f);
  EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ":\n"
                                 << out;
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
  return out;
}

int kernels_compiled(const std::string& out) {
  size_t at = out.find("kernels compiled: ");
  return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 18);
}

}  // namespace

// Run in child processes by the tests below: a generated CPU kernel and a tile kernel, checked.
TEST(ProgramCacheChild, RunsCpuAndTileKernels) {
  if (!std::getenv("CACHE_DAMAGE_CHILD")) GTEST_SKIP() << "a child process of ProgramCacheDamage.*";
  Tensor x = arange(0.0, 64.0).reshape({8, 8}).to(Device::cpu());  // on the CPU under KILN_DEVICE too
  std::vector<float> want(8);
  for (int r = 0; r < 8; r++) want[r] = 3 * (8 * r * 8 + 28) + 8;
  EXPECT_EQ((x * 3 + 1).sum(1).to_vector<float>(), want);
  Tensor a = kiln::testing::tile_input({64, 64}, 1), b = kiln::testing::tile_input({64, 64}, 2);
  tile::Program p = tile_examples::add_program(a, b, 2, 1, 1);
  for (int c = 0; c < 2; c++) p.set_runtime_args(c, {c, 1, 0, 2});
  p.run();
  std::vector<float> sum = a.to_vector<float>(), bv = b.to_vector<float>();
  for (size_t i = 0; i < sum.size(); i++) sum[i] += bv[i];
  kiln::testing::expect_near_all(p.result("y"), sum, 0, 1e-6);
  if (cuda_available()) {  // CUDA kernels: cubins and their index files in the same cache
    Tensor g = arange(0.0, 64.0).reshape({8, 8}).to(Device::cuda());
    EXPECT_EQ((g * 3 + 1).sum(1).to_vector<float>(), want);
  }
  std::printf("kernels compiled: %lld\n", static_cast<long long>(stats().kernels_compiled));
}

TEST(CacheEntry, EveryTruncationBitFlipAndGarbageIsCaught) {
  std::string payload;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; i++) payload += static_cast<char>(rng());
  std::string sealed = runtime::seal_entry(payload);
  ASSERT_EQ(sealed.size(), payload.size() + 24);
  EXPECT_EQ(runtime::unseal_entry(sealed), std::string_view(payload));
  for (size_t n = 0; n < sealed.size(); n++)
    EXPECT_FALSE(runtime::unseal_entry(std::string_view(sealed).substr(0, n))) << "truncated to " << n;
  for (size_t bit = 0; bit < 8 * sealed.size(); bit++) {
    std::string s = sealed;
    s[bit / 8] = static_cast<char>(s[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_FALSE(runtime::unseal_entry(s)) << "bit " << bit << " flipped";
  }
  std::string garbage = sealed;
  for (char& c : garbage) c = static_cast<char>(rng());
  EXPECT_FALSE(runtime::unseal_entry(garbage));
  EXPECT_FALSE(runtime::unseal_entry(payload));  // an entry of the old format, without a footer
}

TEST(ProgramCacheDamage, DamagedEntriesAreRebuiltNeverLoaded) {
  TempCache c("kiln_cache_damage_");
  std::string first = finish(start_child(c.dir));
  EXPECT_GE(kernels_compiled(first), 2) << first;
  std::map<fs::path, std::string> good = entries(c.dir);
  int so = 0;
  for (auto& [p, bytes] : good) so += p.extension() == ".so";
  ASSERT_GE(so, 2) << "a CPU kernel batch and a tile kernel";
  if (cuda_available()) {
    int cubins = 0;
    for (auto& [p, bytes] : good) cubins += p.extension() == ".cubin";
    EXPECT_GE(cubins, 1) << "the child ran a CUDA kernel";
  }
  std::mt19937_64 rng(11);
  const std::vector<std::pair<std::string, std::function<std::string(std::string)>>> damages = {
      {"truncated to 4096 bytes",
       [](std::string s) { return s.substr(0, std::min<size_t>(4096, s.size() / 2)); }},
      {"truncated to half", [](std::string s) { return s.substr(0, s.size() / 2); }},
      {"empty", [](std::string) { return std::string(); }},
      {"garbage",
       [&](std::string s) {
         for (char& ch : s) ch = static_cast<char>(rng());
         return s;
       }},
      {"one bit flipped",
       [](std::string s) {
         s[s.size() / 3] = static_cast<char>(s[s.size() / 3] ^ 0x10);
         return s;
       }},
  };
  for (auto& [what, damage] : damages) {
    for (auto& [p, bytes] : good) write_bytes(p, damage(bytes));
    std::string out = finish(start_child(c.dir));
    EXPECT_NE(out.find("is damaged"), std::string::npos) << what << ":\n" << out;
    EXPECT_GE(kernels_compiled(out), 2) << what << ": the damaged kernels are compiled again\n" << out;
    expect_cache_clean(c.dir);
  }
  // and once rebuilt, a process loads everything from disk
  EXPECT_EQ(kernels_compiled(finish(start_child(c.dir))), 0);
}

TEST(ProgramCacheDamage, FourProcessesShareOneCache) {
  TempCache c("kiln_cache_four_");
  for (int round = 0; round < 2; round++) {  // an empty cache, then one whose every entry is damaged
    std::vector<FILE*> children;
    for (int k = 0; k < 4; k++) children.push_back(start_child(c.dir));
    for (FILE* f : children) {
      std::string out = finish(f);
      EXPECT_GE(kernels_compiled(out), 0) << out;
    }
    expect_cache_clean(c.dir);
    for (auto& [p, bytes] : entries(c.dir)) write_bytes(p, bytes.substr(0, bytes.size() / 2));
  }
}

namespace {
// Settings and the environment variables the cache directory depends on, restored afterwards.
struct EnvGuard {
  Settings saved = settings();
  std::map<std::string, std::optional<std::string>> vars;
  EnvGuard() {
    for (const char* v : {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "TMPDIR"}) {
      const char* s = std::getenv(v);
      vars[v] = s ? std::optional<std::string>(s) : std::nullopt;
    }
  }
  ~EnvGuard() {
    for (auto& [k, v] : vars) v ? setenv(k.c_str(), v->c_str(), 1) : unsetenv(k.c_str());
    settings() = saved;
    clear_memory_cache();
  }
};

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}
}  // namespace

TEST(CacheDir, UnusableDirectoryFallsBackToAPrivateOneWithOneWarning) {
  EnvGuard g;
  TempCache c("kiln_cache_unusable_");
  fs::create_directories(c.dir);
  write_bytes(c.dir / "file", "x");
  for (fs::path bad : {c.dir / "file", c.dir / "file" / "sub"}) {  // a regular file; under one
    settings().cache_dir = bad.string();
    clear_memory_cache();
    ::testing::internal::CaptureStderr();
    Tensor x = arange(0.0, 6.0);
    EXPECT_EQ((x * 2 + 1).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
    EXPECT_EQ((x * 5 - 1).sum().item<float>(), 69);
    std::string used = runtime::cache_dir();
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(count(err, "kiln: warning: cannot use the kernel cache directory " + bad.string()), 1) << err;
    EXPECT_NE(used, bad.string());
    EXPECT_TRUE(fs::is_directory(used));
    EXPECT_EQ(read_bytes(c.dir / "file"), "x");
  }
  // a read-only directory (root may write anywhere: then the check runs as user "nobody")
  fs::path ro = c.dir / "ro";
  fs::create_directories(ro);
  fs::permissions(
      ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(c.dir, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  settings().cache_dir = ro.string();
  auto check = [&] {
    std::string used = runtime::cache_dir();
    return used != ro.string() && fs::is_directory(used) && fs::is_empty(ro);
  };
  if (geteuid() != 0) {
    EXPECT_TRUE(check());
  } else {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
      _exit(check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the read-only directory was used, 2: cannot drop privileges";
  }
  fs::permissions(ro, fs::perms::owner_all);
}

TEST(CacheDir, DefaultIsPerUserAndPrivate) {
  EnvGuard g;
  TempCache c("kiln_cache_default_");
  fs::create_directories(c.dir);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(ir::default_cache_dir(), "/xdg/kiln");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(ir::default_cache_dir(), "/home/u/.cache/kiln");
  // no HOME: a directory of this user's own in the temporary directory, never one all users share
  unsetenv("HOME");
  setenv("TMPDIR", c.dir.c_str(), 1);
  std::string mine = (c.dir / ("kiln-cache-" + std::to_string(geteuid()))).string();
  EXPECT_EQ(ir::default_cache_dir(), mine);
  settings().cache_dir = mine;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runtime::cache_dir(), mine);
  EXPECT_EQ(fs::status(mine).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // opened to others, or owned by someone else (as root we can give it away): not used
  fs::permissions(mine, fs::perms::all);
  ::testing::internal::CaptureStderr();
  EXPECT_NE(runtime::cache_dir(), mine);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("writable by other users"), std::string::npos) << err;
  if (geteuid() == 0) {
    std::string theirs = (c.dir / "theirs").string();
    setenv("TMPDIR", theirs.c_str(), 1);
    fs::create_directories(theirs + "/kiln-cache-0");
    ASSERT_EQ(::chown((theirs + "/kiln-cache-0").c_str(), 65534, 65534), 0);
    settings().cache_dir = ir::default_cache_dir();
    ::testing::internal::CaptureStderr();
    EXPECT_NE(runtime::cache_dir(), settings().cache_dir);
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("owned by user 65534"), std::string::npos) << err;
  }
}

TEST(CacheDir, TemporariesOfKilledCompilesAreSwept) {
  EnvGuard g;
  TempCache c("kiln_cache_sweep_");
  fs::create_directories(c.dir);
  pid_t gone = fork();  // a pid that no longer runs
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  std::string dead = std::to_string(gone), live = std::to_string(getpid());
  for (std::string n : std::vector<std::string>{".b_1.so.tmp." + dead + ".0", ".b_1.so.tmp." + dead + ".1.c",
                                                ".k.idx.tmp." + live + ".5", "b_2.so"})
    write_bytes(c.dir / n, "x");
  EXPECT_EQ(runtime::cache_dir(), c.dir.string());
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(c.dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".k.idx.tmp." + live + ".5", "b_2.so"}));
}
