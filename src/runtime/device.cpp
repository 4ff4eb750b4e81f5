// The default device (KILN_DEVICE), device names, and synchronization.
#include "kiln/device.h"

#include <cstdlib>
#include <mutex>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"

namespace kiln {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda" || s == "gpu") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda(std::atoi(s.c_str() + 5));
  throw Error("kiln: unknown device '" + s + "' (expected cpu, cuda or cuda:<index>)");
}

namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
Device& current() {
  static Device d = Device::parse(settings().device);
  return d;
}
}  // namespace

Device default_device() {
  std::lock_guard<std::mutex> l(mu());
  return current();
}

void set_default_device(Device d) {
  std::lock_guard<std::mutex> l(mu());
  current() = d;
}

bool cuda_available(std::string* why) {
  const auto& a = runtime::cuda::availability();
  if (!a.available && why) *why = a.reason;
  return a.available;
}

MemoryStats memory_stats(Device d) {
  if (!d.is_cuda())
    throw Error("kiln.memory_stats: memory is counted on CUDA devices only, not on " + d.str());
  runtime::cuda::AllocatorStats a = runtime::cuda::allocator_stats(d.index);
  return {static_cast<int64_t>(a.in_use), static_cast<int64_t>(a.peak), static_cast<int64_t>(a.cached)};
}

void reset_peak_memory(Device d) {
  if (!d.is_cuda())
    throw Error("kiln.reset_peak_memory: memory is counted on CUDA devices only, not on " + d.str());
  runtime::cuda::reset_peak(d.index);
}

void synchronize(Device d) {
  if (d.is_cuda()) runtime::cuda::synchronize(d.index);
}

}  // namespace kiln
