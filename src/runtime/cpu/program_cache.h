// Compiled-program cache for CPU kernels: in memory and on disk (KILN_CACHE_DIR), keyed by the
// content hash of (kernel source, compiler, flags). Misses of one schedule compile in groups side by side.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program_cache.h"

namespace kiln::runtime {

using KernelFn = void (*)(void** bufs, int64_t start, int64_t end);

std::vector<KernelFn> load_programs(const std::vector<KernelSource>& kernels);
// The address of `symbol` in the shared object built by the C++ compiler from `source` (tile
// kernels), cached the same way. `include_dir` is passed with -I; `headers_hash` stands for the
// headers found there, so a changed header is a different program.
void* load_cxx_symbol(const std::string& source, const std::string& symbol, const std::string& name,
                      const std::string& include_dir, uint64_t headers_hash);

}  // namespace kiln::runtime
