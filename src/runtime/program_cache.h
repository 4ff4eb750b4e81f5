// Compiled-program cache for CPU kernels: in memory and on disk (KILN_CACHE_DIR), keyed by the
// content hash of (kernel source, compiler, flags). Misses of one schedule compile in one call.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

using KernelFn = void (*)(void** bufs, int64_t start, int64_t end);

struct KernelSource {
  std::string name;    // for messages
  std::string symbol;  // C function name; the entry point is symbol + "_call"
  std::string source;  // C source without the prelude
};

std::vector<KernelFn> load_programs(const std::vector<KernelSource>& kernels);
uint64_t hash_string(const std::string& s, uint64_t seed = 0);

}  // namespace kiln::runtime
