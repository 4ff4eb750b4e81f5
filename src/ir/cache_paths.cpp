// The kernel cache's default places (see cache_paths.h).
#include "ir/cache_paths.h"

#include <unistd.h>

#include <filesystem>

namespace kiln::ir {

std::string temp_root() {
  std::error_code ec;
  std::string t = std::filesystem::temp_directory_path(ec).string();  // $TMPDIR, else /tmp
  return ec || t.empty() ? "/tmp" : t;
}

std::string per_user_temp_cache_dir() { return temp_root() + "/kiln-cache-" + std::to_string(::geteuid()); }

std::string default_cache_dir(const std::function<const char*(const char*)>& get) {
  auto env = [&](const char* name) -> std::string {
    const char* v = get(name);
    return v ? v : "";
  };
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x[0] == '/') return x + "/kiln";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/kiln";
  return per_user_temp_cache_dir();
}

}  // namespace kiln::ir
