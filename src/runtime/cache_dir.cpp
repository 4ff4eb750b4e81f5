// Choosing the program cache directory (see cache_dir.h).
#include "runtime/cache_dir.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/atomic_file.h"

namespace kiln::runtime {

namespace {

// Why `dir` cannot hold the cache, or "" when it can (it is created if missing).
std::string unusable(const std::string& dir) {
  bool per_user = dir == ir::per_user_temp_cache_dir();
  if (per_user) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::strerror(errno);
    struct stat st;  // in a directory all users share: it must be ours alone
    if (::lstat(dir.c_str(), &st) != 0) return std::strerror(errno);
    if (!S_ISDIR(st.st_mode)) return "not a directory";
    if (st.st_uid != ::geteuid()) return "owned by user " + std::to_string(st.st_uid) + ", not by us";
    if (st.st_mode & 022) return "writable by other users";
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return "cannot create it: " + ec.message();
    if (!std::filesystem::is_directory(dir, ec)) return "not a directory";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  struct statvfs fs;  // compiled programs are mapped executable from here
  if (::statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_NOEXEC)) return "on a noexec file system";
  return "";
}

// A directory of this process alone, removed at exit (loaded programs stay mapped).
struct PrivateDir {
  std::string path;
  ~PrivateDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::string cache_dir() {
  static std::mutex mu;
  static std::map<std::string, std::string> fell_back;  // unusable configured directory -> private one
  static std::set<std::string> swept;                   // directories cleared of stale temporaries
  static PrivateDir fallback;
  std::lock_guard<std::mutex> l(mu);
  const std::string configured = settings().cache_dir;
  if (auto it = fell_back.find(configured); it != fell_back.end()) return it->second;
  // checked on each call: a directory usable before may have been removed since
  std::string why = configured.empty() ? "none configured" : unusable(configured);
  if (why.empty()) {
    if (swept.insert(configured).second) remove_stale_temps(configured);  // left by killed compiles
    return configured;
  }
  if (fallback.path.empty()) {
    std::string tmpl = ir::temp_root() + "/kiln-private-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      throw Error("kiln: cannot use the kernel cache directory " + configured + " (" + why +
                  ") nor make a private one in " + ir::temp_root() + " (" + std::strerror(errno) +
                  "); set KILN_CACHE_DIR to a writable directory");
    fallback.path = tmpl;
  }
  std::fprintf(stderr,
               "kiln: warning: cannot use the kernel cache directory %s (%s); compiling into %s for this "
               "process only (set KILN_CACHE_DIR to a writable directory)\n",
               configured.c_str(), why.c_str(), fallback.path.c_str());
  return fell_back[configured] = fallback.path;
}

}  // namespace kiln::runtime
