// The CUDA driver and NVRTC, loaded at run time (dlopen): one kiln build runs on machines with and
// without a GPU. This part finds them and describes the devices.
#pragma once
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t memory_bytes = 0;
};

struct Availability {
  bool available = false;
  std::string reason;  // why not, when not available (names the library or the driver call)
  int driver_version = 0;
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::vector<DeviceInfo> devices;
};

// Probes once (thread-safe) and caches the answer.
const Availability& availability();
std::string describe(const Availability& a);  // lines for `kiln info`

}  // namespace kiln::runtime::cuda
