// Finds libcuda and libnvrtc with dlopen and asks the driver for its devices.
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace kiln::runtime::cuda {

namespace {

// The few driver entry points used here (CUresult is an int; 0 is success).
using cuInit_t = int (*)(unsigned);
using cuDriverGetVersion_t = int (*)(int*);
using cuDeviceGetCount_t = int (*)(int*);
using cuDeviceGet_t = int (*)(int*, int);
using cuDeviceGetName_t = int (*)(char*, int, int);
using cuDeviceGetAttribute_t = int (*)(int*, int, int);
using cuDeviceTotalMem_t = int (*)(size_t*, int);
using cuGetErrorString_t = int (*)(int, const char**);
using nvrtcVersion_t = int (*)(int*, int*);

// CUdevice_attribute values from the driver API
constexpr int kAttrMultiprocessors = 16, kAttrMajor = 75, kAttrMinor = 76;

void* open_first(const std::vector<std::string>& names, std::string& tried) {
  for (const auto& n : names) {
    if (n.empty()) continue;
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

template <class F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

Availability probe() {
  Availability a;
  std::string tried;
  void* cu = open_first({"libcuda.so.1", "libcuda.so"}, tried);
  if (!cu) {
    a.reason = "the CUDA driver library is not installed (tried " + tried +
               "): no NVIDIA GPU driver on this machine";
    return a;
  }
  auto init = sym<cuInit_t>(cu, "cuInit");
  auto version = sym<cuDriverGetVersion_t>(cu, "cuDriverGetVersion");
  auto count = sym<cuDeviceGetCount_t>(cu, "cuDeviceGetCount");
  auto get = sym<cuDeviceGet_t>(cu, "cuDeviceGet");
  auto name = sym<cuDeviceGetName_t>(cu, "cuDeviceGetName");
  auto attr = sym<cuDeviceGetAttribute_t>(cu, "cuDeviceGetAttribute");
  auto mem = sym<cuDeviceTotalMem_t>(cu, "cuDeviceTotalMem_v2");
  auto err = sym<cuGetErrorString_t>(cu, "cuGetErrorString");
  if (!init || !version || !count || !get || !name || !attr || !mem) {
    a.reason = "libcuda is missing driver entry points (too old a driver?)";
    return a;
  }
  auto fail = [&](const char* call, int rc) {
    const char* s = nullptr;
    if (err) err(rc, &s);
    a.reason = std::string(call) + " failed with error " + std::to_string(rc) +
               (s ? std::string(" (") + s + ")" : "");
  };
  if (int rc = init(0)) {
    fail("cuInit", rc);
    return a;
  }
  version(&a.driver_version);
  int n = 0;
  if (int rc = count(&n)) {
    fail("cuDeviceGetCount", rc);
    return a;
  }
  for (int i = 0; i < n; i++) {
    DeviceInfo d;
    int dev = 0;
    if (get(&dev, i)) continue;
    char buf[256] = {0};
    name(buf, sizeof buf, dev);
    d.ordinal = i;
    d.name = buf;
    attr(&d.major, kAttrMajor, dev);
    attr(&d.minor, kAttrMinor, dev);
    attr(&d.multiprocessors, kAttrMultiprocessors, dev);
    mem(&d.memory_bytes, dev);
    a.devices.push_back(d);
  }
  if (a.devices.empty()) {
    a.reason = "the CUDA driver is installed but reports no devices";
    return a;
  }
  std::string nv_tried;
  // the loader path, then the toolkit's usual homes (KILN_NVRTC names a library explicitly)
  std::string home = env("CUDA_HOME").empty() ? env("CUDA_PATH") : env("CUDA_HOME");
  void* nv =
      open_first({env("KILN_NVRTC"), "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                  home.empty() ? "" : home + "/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"},
                 nv_tried);
  auto nv_version = nv ? sym<nvrtcVersion_t>(nv, "nvrtcVersion") : nullptr;
  if (!nv_version) {
    a.reason = "NVRTC (the runtime CUDA compiler) is not installed (tried " + nv_tried + ")";
    return a;
  }
  nv_version(&a.nvrtc_major, &a.nvrtc_minor);
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
