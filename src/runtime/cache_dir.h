// Where the program cache lives: the configured directory when it is usable, else a private
// temporary directory for this process (with one warning), so a bad cache never stops the work.
#pragma once
#include <cstdlib>
#include <functional>
#include <string>

namespace kiln::runtime {

// The directory used where KILN_CACHE_DIR (Settings::cache_dir) is unset: $XDG_CACHE_HOME/kiln,
// else $HOME/.cache/kiln, else per_user_temp_cache_dir() (never a directory shared by all users).
// `get` reads the environment.
std::string default_cache_dir(const std::function<const char*(const char*)>& get = [](const char* name) {
  return static_cast<const char*>(std::getenv(name));
});
// <temp dir>/kiln-cache-<uid>: made 0700 and used only while owned by us and closed to others.
std::string per_user_temp_cache_dir();

// The cache directory to use now: Settings::cache_dir (created if missing) when it is a directory
// we may write, else a private directory made for this process (removed at exit), announced by
// one warning line on stderr. Throws kiln::Error only when no directory can be had at all.
std::string cache_dir();

}  // namespace kiln::runtime
