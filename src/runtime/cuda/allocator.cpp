// Caching device allocator (see allocator.h).
#include "runtime/cuda/allocator.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/cuda/context.h"

namespace kiln::runtime::cuda {

namespace {

// Small blocks round to 512 bytes, large ones to 2 MiB, so sizes that differ a little share blocks.
size_t rounded(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t q = bytes < (size_t{1} << 20) ? 512 : (size_t{2} << 20);
  return (bytes + q - 1) / q * q;
}

struct Pool {
  std::mutex mu;
  std::multimap<size_t, CUdeviceptr> free;  // by size: best fit is lower_bound
  AllocatorStats stats;
};

Pool& pool(int ordinal) {
  static std::mutex mu;
  static std::vector<Pool*>* pools = new std::vector<Pool*>();
  std::lock_guard<std::mutex> l(mu);
  if (pools->size() <= static_cast<size_t>(ordinal)) pools->resize(static_cast<size_t>(ordinal) + 1, nullptr);
  Pool*& p = (*pools)[static_cast<size_t>(ordinal)];
  if (!p) p = new Pool();  // never destroyed: buffers may be freed by static destructors
  return *p;
}

void release_locked(Pool& p, const Api* a) {
  for (auto& [size, ptr] : p.free) a->cuMemFree(ptr);
  p.free.clear();
  p.stats.cached = 0;
}

constexpr int kErrorOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY

[[noreturn]] void out_of_memory(Context& c, const Pool& p, int ordinal, size_t bytes) {
  size_t free_b = 0, total_b = 0;
  c.api->cuMemGetInfo(&free_b, &total_b);
  throw Error("kiln.cuda: out of device memory allocating " + std::to_string(bytes) + " bytes on cuda:" +
              std::to_string(ordinal) + " (" + std::to_string(p.stats.in_use) + " bytes in use by kiln, " +
              std::to_string(free_b) + " of " + std::to_string(total_b) + " free)");
}

}  // namespace

CUdeviceptr device_alloc(int ordinal, size_t bytes) {
  Context& c = context(ordinal);
  Pool& p = pool(ordinal);
  std::lock_guard<std::mutex> l(p.mu);
  if (bytes > SIZE_MAX / 2) out_of_memory(c, p, ordinal, bytes);  // no device holds it; rounding would wrap
  size_t size = rounded(bytes);
  // a cached block at most 25% larger than asked (so a huge block does not serve a small request)
  auto it = p.free.lower_bound(size);
  if (it != p.free.end() && it->first <= size + size / 4) {
    // the block is handed out (and later freed) under the requested size: a block is never
    // smaller than the size it is filed under, so reuse stays safe; the slack is not counted
    CUdeviceptr ptr = it->second;
    p.stats.cached -= it->first;
    p.stats.in_use += size;
    p.free.erase(it);
    if (p.stats.in_use > p.stats.peak) p.stats.peak = p.stats.in_use;
    return ptr;
  }
  CUdeviceptr ptr = 0;
  refuse_while_capturing("allocating device memory");
  int rc = c.api->cuMemAlloc(&ptr, size);
  if (rc != 0) {  // out of memory: give the cache back and try once more
    release_locked(p, c.api);
    rc = c.api->cuMemAlloc(&ptr, size);
  }
  if (rc == kErrorOutOfMemory) out_of_memory(c, p, ordinal, bytes);
  check(rc, ("cuMemAlloc of " + std::to_string(bytes) + " bytes").c_str());  // another failure: its name
  p.stats.device_allocs++;
  p.stats.in_use += size;
  if (p.stats.in_use > p.stats.peak) p.stats.peak = p.stats.in_use;
  return ptr;
}

void device_free(int ordinal, CUdeviceptr ptr, size_t bytes) {
  if (!ptr) return;
  Pool& p = pool(ordinal);
  size_t size = rounded(bytes);
  std::lock_guard<std::mutex> l(p.mu);
  p.free.emplace(size, ptr);
  p.stats.in_use -= size;
  p.stats.cached += size;
}

AllocatorStats allocator_stats(int ordinal) {
  Pool& p = pool(ordinal);
  std::lock_guard<std::mutex> l(p.mu);
  return p.stats;
}

void reset_peak(int ordinal) {
  Pool& p = pool(ordinal);
  std::lock_guard<std::mutex> l(p.mu);
  p.stats.peak = p.stats.in_use;
}

void release_cached(int ordinal) {
  Context& c = context(ordinal);
  Pool& p = pool(ordinal);
  std::lock_guard<std::mutex> l(p.mu);
  release_locked(p, c.api);
}

}  // namespace kiln::runtime::cuda
