// What every backend's program cache shares (runtime/cpu/program_cache.h, runtime/cuda/program_cache.h):
// kernel sources, content hashes, and a schedule's misses as groups compiled side by side.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::runtime {

struct KernelSource {
  std::string name;    // for messages
  std::string symbol;  // function name (C: the entry point is symbol + "_call"; CUDA: the kernel)
  std::string source;  // C or CUDA C++ source without the prelude
};

// Kernels of a schedule that no cache had, as one translation unit for one compiler call: the
// prelude, then each distinct kernel once. `what` names them for messages; `key` names the batch
// (a hash of their keys and the compiler id).
struct Batch {
  std::string source, what, key;
};
Batch make_batch(const std::string& prelude, const std::vector<KernelSource>& kernels,
                 const std::vector<std::string>& keys, const std::vector<size_t>& missing,
                 const std::string& id);
std::string hash_hex(uint64_t v);  // 16 hex digits
// The missing kernels as groups to compile in parallel, one translation unit each: about 8 distinct
// kernels a group, at most one group per hardware thread, sizes balanced, a symbol's kernels
// together. A few kernels stay one group.
std::vector<std::vector<size_t>> compile_groups(const std::vector<KernelSource>& kernels,
                                                const std::vector<size_t>& missing);
// Runs f(0), ..., f(n - 1) on n threads (inline when n is 1); rethrows the first exception once all
// have ended.
void run_parallel(size_t n, const std::function<void(size_t)>& f);

uint64_t hash_string(const std::string& s, uint64_t seed = 0);

// Registers a cache's clear function, which kiln::clear_memory_cache calls (with every backend's
// clear_program_cache).
void on_clear_memory_cache(void (*clear)());

}  // namespace kiln::runtime
