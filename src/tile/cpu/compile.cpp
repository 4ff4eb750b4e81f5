// Builds a tile program with the system C++ compiler, cached like generated kernels (in memory and
// in KILN_CACHE_DIR, keyed by the full generated source, the compiler, its flags and the headers).
// The kernel-facing headers are written from the copies embedded in the library, so the compiler
// finds the ones this library was built with, from a build tree or an install alike.
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "kiln/debug.h"
#include "runtime/cache_dir.h"
#include "runtime/cpu/program_cache.h"
#include "runtime/file_util.h"
#include "tile/cpu/launch_state.h"

namespace kiln::tile::cpu {

namespace {

struct Headers {
  std::string dir;
  uint64_t hash;
};

const Headers& headers() {
  static std::mutex mu;
  static std::string for_cache_dir;
  static Headers h;
  std::lock_guard<std::mutex> l(mu);
  const std::string cache = runtime::cache_dir();
  if (for_cache_dir != cache || h.dir.empty() || !std::filesystem::is_directory(h.dir)) {
    uint64_t hash = 0;
    for (auto& [path, text] : embedded_headers()) hash = runtime::hash_string(path + text, hash);
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    std::string dir = cache + "/tile_include_" + hex;
    for (auto& [path, text] : embedded_headers()) {
      std::string file = dir + "/" + path;
      if (runtime::read_file(file) == text) continue;
      runtime::make_dirs(file.substr(0, file.rfind('/')));
      runtime::write_file_atomic(file, text);
    }
    h = Headers{dir, hash};
    for_cache_dir = cache;
  }
  return h;
}

}  // namespace

Entry compile(const Program::Desc& d) {
  std::string source = generate_source(d);
  if (settings().debug >= 4)
    std::fprintf(stderr, "kiln: tile program '%s':\n%s\n", d.name.c_str(), source.c_str());
  const Headers& h = headers();
  void* p =
      runtime::load_cxx_symbol(source, "kiln_tile_entry", "tile program '" + d.name + "'", h.dir, h.hash);
  return reinterpret_cast<Entry>(p);
}

}  // namespace kiln::tile::cpu
