// Builds a tile program for the GPU: the generated source with the kernel-facing headers pasted in
// (NVRTC has no include path; pasting keeps the cache key the full text NVRTC compiles), compiled
// by NVRTC as C++20 for the device's architecture and cached by the CUDA program cache (in memory
// and in KILN_CACHE_DIR, keyed by that text, the NVRTC version and the options).
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "kiln/debug.h"
#include "runtime/cuda/program_cache.h"
#include "tile/cuda/launch_state.h"

namespace kiln::tile::cuda {

namespace {

const std::string* embedded_header(const std::string& path) {
  for (auto& [p, text] : embedded_headers())
    if (p == path) return &text;
  return nullptr;
}

// The header named by an #include line ("kiln/tile/x.h" in quotes or brackets), if embedded.
const std::string* included(const std::string& line, std::string& path) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line.compare(i, 8, "#include") != 0) return nullptr;
  size_t open = line.find_first_of("\"<", i + 8);
  if (open == std::string::npos) return nullptr;
  size_t close = line.find_first_of("\">", open + 1);
  if (close == std::string::npos) return nullptr;
  path = line.substr(open + 1, close - open - 1);
  return embedded_header(path);
}

// Pastes embedded headers in place of their #include lines, each once (#pragma once has no
// meaning in one buffer); #line keeps NVRTC's messages pointing at the right file and line.
void paste(const std::string& text, const std::string& name, std::set<std::string>& seen, std::string& out) {
  std::istringstream in(text);
  std::string line, path;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    if (line.rfind("#pragma once", 0) == 0) {
      out += "\n";
      continue;
    }
    if (const std::string* h = included(line, path)) {
      if (seen.insert(path).second) {
        out += "#line 1 \"" + path + "\"\n";
        paste(*h, path, seen, out);
        out += "#line " + std::to_string(n + 1) + " \"" + name + "\"\n";
      } else {
        out += "\n";
      }
      continue;
    }
    out += line + "\n";
  }
}

}  // namespace

std::string cuda_source(const Program::Desc& d) {
  std::string out;
  std::set<std::string> seen;
  paste(generate_source(d, Target::Cuda), "<kiln tile prelude>", seen, out);
  return out;
}

// Kernels already loaded, by device and generated source (before pasting: pasting the headers
// costs more than a launch).
runtime::cuda::CUfunction compile(const Program::Desc& d, int ordinal) {
  static std::mutex mu;
  static std::unordered_map<std::string, runtime::cuda::CUfunction> loaded;
  std::string key = std::to_string(ordinal) + "\n" + generate_source(d, Target::Cuda);
  {
    std::lock_guard<std::mutex> l(mu);
    if (auto it = loaded.find(key); it != loaded.end() && settings().debug < 4) {
      stats().memory_cache_hits++;
      return it->second;
    }
  }
  std::string source = cuda_source(d);
  if (settings().debug >= 4)
    std::fprintf(stderr, "kiln: tile program '%s' for CUDA:\n%s\n", d.name.c_str(), source.c_str());
  runtime::cuda::CUfunction f =
      runtime::cuda::load_program(ordinal, "tile program '" + d.name + "'", source, kCudaEntry, "c++20");
  std::lock_guard<std::mutex> l(mu);
  loaded.emplace(std::move(key), f);
  return f;
}

}  // namespace kiln::tile::cuda
