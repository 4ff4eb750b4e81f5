// The default device (KILN_DEVICE) and synchronization (through the backend); names: ir/device.cpp.
#include "kiln/device.h"

#include <cstdlib>
#include <mutex>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln {

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

MemoryStats memory_stats(Device d) {
  std::optional<MemoryStats> s = runtime::backend(d).memory_stats();
  if (!s) throw Error("kiln.memory_stats: memory is counted on CUDA devices only, not on " + d.str());
  return *s;
}

void reset_peak_memory(Device d) {
  if (!runtime::backend(d).memory_stats())
    throw Error("kiln.reset_peak_memory: memory is counted on CUDA devices only, not on " + d.str());
  runtime::backend(d).reset_peak_memory();
}

void synchronize(Device d) { runtime::backend(d).synchronize(); }

}  // namespace kiln
