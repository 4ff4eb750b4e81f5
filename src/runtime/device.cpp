// The default device (KILN_DEVICE), device names, and synchronization (through the backend).
#include "kiln/device.h"

#include <cstdlib>
#include <mutex>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "ref") return {Kind::REF, 0};
  if (s == "cuda" || s == "gpu") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 8 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos && std::atoi(s.c_str() + 5) < kMaxIndex)
    return cuda(std::atoi(s.c_str() + 5));
  throw Error("kiln: unknown device '" + s + "' (expected cpu, ref, cuda or cuda:<index> below " +
              std::to_string(kMaxIndex) + ")");
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
