// Finds libcuda and libnvrtc with dlopen and asks the driver for its devices.
#include "runtime/cuda/driver.h"

#include <cstdio>
#include <mutex>

#include "kiln/device.h"
#include "runtime/cuda/api.h"

namespace kiln::runtime::cuda {

namespace {

// CUdevice_attribute values from the driver API
constexpr int kAttrMultiprocessors = 16, kAttrMajor = 75, kAttrMinor = 76;

Availability probe() {
  Availability a;
  const Api* cu = api(&a.reason);
  if (!cu) return a;
  auto fail = [&](const char* call, int rc) {
    const char* s = nullptr;
    cu->cuGetErrorString(rc, &s);
    a.reason = std::string(call) + " failed with error " + std::to_string(rc) +
               (s ? std::string(" (") + s + ")" : "");
  };
  if (int rc = cu->cuInit(0)) {
    fail("cuInit", rc);
    return a;
  }
  cu->cuDriverGetVersion(&a.driver_version);
  cu->nvrtcVersion(&a.nvrtc_major, &a.nvrtc_minor);
  int n = 0;
  if (int rc = cu->cuDeviceGetCount(&n)) {
    fail("cuDeviceGetCount", rc);
    return a;
  }
  for (int i = 0; i < n; i++) {
    DeviceInfo d;
    int dev = 0;
    if (cu->cuDeviceGet(&dev, i)) continue;
    char buf[256] = {0};
    cu->cuDeviceGetName(buf, sizeof buf, dev);
    d.ordinal = i;
    d.name = buf;
    cu->cuDeviceGetAttribute(&d.major, kAttrMajor, dev);
    cu->cuDeviceGetAttribute(&d.minor, kAttrMinor, dev);
    cu->cuDeviceGetAttribute(&d.multiprocessors, kAttrMultiprocessors, dev);
    cu->cuDeviceTotalMem(&d.memory_bytes, dev);
    a.devices.push_back(d);
  }
  if (a.devices.empty()) {
    a.reason = "the CUDA driver is installed but reports no devices";
    return a;
  }
  a.available = true;
  return a;
}

}  // namespace

const Availability& availability() {
  static std::once_flag once;
  static Availability a;
  std::call_once(once, [] { a = probe(); });
  return a;
}

std::string describe(const Availability& a) {
  std::string s;
  char buf[512];
  for (auto& d : a.devices) {
    std::snprintf(buf, sizeof buf, "  cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB)\n", d.ordinal, d.name.c_str(),
                  d.major, d.minor, d.multiprocessors, static_cast<double>(d.memory_bytes) / (1 << 30));
    s += buf;
  }
  if (a.driver_version) {
    std::snprintf(buf, sizeof buf, "  driver CUDA %d.%d", a.driver_version / 1000,
                  (a.driver_version % 1000) / 10);
    s += buf;
    if (a.nvrtc_major) {
      std::snprintf(buf, sizeof buf, ", NVRTC %d.%d", a.nvrtc_major, a.nvrtc_minor);
      s += buf;
    }
    s += "\n";
  }
  if (!a.available) s += "  not usable: " + a.reason + "\n";
  return s;
}

}  // namespace kiln::runtime::cuda

namespace kiln {
bool cuda_available(std::string* why) {
  const auto& a = runtime::cuda::availability();
  if (!a.available && why) *why = a.reason;
  return a.available;
}
}  // namespace kiln
