// Where the kernel cache goes by default (Settings::cache_dir when KILN_CACHE_DIR is unset): pure
// functions of the environment, read by the settings (ir/settings.cpp) and runtime/cache_dir.cpp.
#pragma once
#include <cstdlib>
#include <functional>
#include <string>

namespace kiln::ir {

// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else per_user_temp_cache_dir() (never a directory
// shared by all users). `get` reads the environment.
std::string default_cache_dir(const std::function<const char*(const char*)>& get = [](const char* name) {
  return static_cast<const char*>(std::getenv(name));
});
// <temp dir>/kiln-cache-<uid>: made 0700 and used only while owned by us and closed to others.
std::string per_user_temp_cache_dir();
// $TMPDIR, else /tmp.
std::string temp_root();

}  // namespace kiln::ir
