// Where the program cache lives: the configured directory when it is usable, else a private
// temporary directory for this process (with one warning), so a bad cache never stops the work.
#pragma once
#include <string>

#include "ir/cache_paths.h"

namespace kiln::runtime {

// The cache directory to use now: Settings::cache_dir (created if missing) when it is a directory
// we may write, else a private directory made for this process (removed at exit), announced by
// one warning line on stderr. Throws kiln::Error only when no directory can be had at all.
std::string cache_dir();

}  // namespace kiln::runtime
