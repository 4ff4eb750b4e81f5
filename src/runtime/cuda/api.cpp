// Loads libcuda and libnvrtc with dlopen (see api.h).
#include "runtime/cuda/api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {

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

void* symbol(void* lib, const char* name) { return dlsym(lib, name); }

namespace {

struct Loaded {
  Api api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded r;
  Api& a = r.api;
  std::string tried;
  a.libcuda = open_first({"libcuda.so.1", "libcuda.so"}, tried);
  if (!a.libcuda) {
    r.why = "the CUDA driver library is not installed (tried " + tried +
            "): no NVIDIA GPU driver on this machine";
    return r;
  }
  std::string missing;
  void* cu = a.libcuda;
  bind(cu, a.cuInit, "cuInit", missing);
  bind(cu, a.cuDriverGetVersion, "cuDriverGetVersion", missing);
  bind(cu, a.cuDeviceGetCount, "cuDeviceGetCount", missing);
  bind(cu, a.cuDeviceGet, "cuDeviceGet", missing);
  bind(cu, a.cuDeviceGetName, "cuDeviceGetName", missing);
  bind(cu, a.cuDeviceGetAttribute, "cuDeviceGetAttribute", missing);
  bind(cu, a.cuDeviceTotalMem, "cuDeviceTotalMem_v2", missing);
  bind(cu, a.cuGetErrorString, "cuGetErrorString", missing);
  bind(cu, a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  bind(cu, a.cuCtxSetCurrent, "cuCtxSetCurrent", missing);
  bind(cu, a.cuCtxSynchronize, "cuCtxSynchronize", missing);
  bind(cu, a.cuMemAlloc, "cuMemAlloc_v2", missing);
  bind(cu, a.cuMemFree, "cuMemFree_v2", missing);
  bind(cu, a.cuMemGetInfo, "cuMemGetInfo_v2", missing);
  bind(cu, a.cuMemHostAlloc, "cuMemHostAlloc", missing);
  bind(cu, a.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", missing);
  bind(cu, a.cuMemFreeHost, "cuMemFreeHost", missing);
  bind(cu, a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", missing);
  bind(cu, a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", missing);
  bind(cu, a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  bind(cu, a.cuMemsetD8Async, "cuMemsetD8Async", missing);
  bind(cu, a.cuStreamCreate, "cuStreamCreate", missing);
  bind(cu, a.cuStreamSynchronize, "cuStreamSynchronize", missing);
  bind(cu, a.cuEventCreate, "cuEventCreate", missing);
  bind(cu, a.cuEventRecord, "cuEventRecord", missing);
  bind(cu, a.cuEventSynchronize, "cuEventSynchronize", missing);
  bind(cu, a.cuEventElapsedTime, "cuEventElapsedTime_v2", missing);
  if (!a.cuEventElapsedTime) {  // older drivers name it without the suffix
    missing.clear();
    bind(cu, a.cuEventElapsedTime, "cuEventElapsedTime", missing);
  }
  bind(cu, a.cuEventDestroy, "cuEventDestroy_v2", missing);
  bind(cu, a.cuModuleLoadData, "cuModuleLoadData", missing);
  bind(cu, a.cuModuleGetFunction, "cuModuleGetFunction", missing);
  bind(cu, a.cuFuncSetAttribute, "cuFuncSetAttribute", missing);
  bind(cu, a.cuLaunchKernel, "cuLaunchKernel", missing);
  a.cuEventQuery = reinterpret_cast<decltype(a.cuEventQuery)>(dlsym(cu, "cuEventQuery"));
  a.cuLaunchCooperativeKernel =
      reinterpret_cast<decltype(a.cuLaunchCooperativeKernel)>(dlsym(cu, "cuLaunchCooperativeKernel"));
  a.cuLaunchKernelEx = reinterpret_cast<decltype(a.cuLaunchKernelEx)>(dlsym(cu, "cuLaunchKernelEx"));
  a.cuTensorMapEncodeTiled =
      reinterpret_cast<decltype(a.cuTensorMapEncodeTiled)>(dlsym(cu, "cuTensorMapEncodeTiled"));
  bind(cu, a.cuStreamBeginCapture, "cuStreamBeginCapture_v2", missing);
  bind(cu, a.cuStreamEndCapture, "cuStreamEndCapture", missing);
  bind(cu, a.cuGraphInstantiate, "cuGraphInstantiateWithFlags", missing);
  bind(cu, a.cuGraphLaunch, "cuGraphLaunch", missing);
  bind(cu, a.cuGraphExecDestroy, "cuGraphExecDestroy", missing);
  bind(cu, a.cuGraphDestroy, "cuGraphDestroy", missing);
  bind(cu, a.cuGraphGetNodes, "cuGraphGetNodes", missing);
  a.cuGraphExecUpdate = reinterpret_cast<decltype(a.cuGraphExecUpdate)>(dlsym(cu, "cuGraphExecUpdate_v2"));
  if (!missing.empty()) {
    r.why = "libcuda lacks the entry point " + missing + " (too old a driver?)";
    return r;
  }
  std::string nv_tried;
  // the loader path, then the toolkit's usual homes (KILN_NVRTC names a library explicitly)
  std::string home = env("CUDA_HOME").empty() ? env("CUDA_PATH") : env("CUDA_HOME");
  a.libnvrtc =
      open_first({settings().nvrtc, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                  home.empty() ? "" : home + "/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"},
                 nv_tried);
  if (!a.libnvrtc) {
    r.why = "NVRTC (the runtime CUDA compiler) is not installed (tried " + nv_tried + ")";
    return r;
  }
  void* nv = a.libnvrtc;
  bind(nv, a.nvrtcVersion, "nvrtcVersion", missing);
  bind(nv, a.nvrtcCreateProgram, "nvrtcCreateProgram", missing);
  bind(nv, a.nvrtcCompileProgram, "nvrtcCompileProgram", missing);
  bind(nv, a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", missing);
  bind(nv, a.nvrtcGetProgramLog, "nvrtcGetProgramLog", missing);
  bind(nv, a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", missing);
  bind(nv, a.nvrtcGetCUBIN, "nvrtcGetCUBIN", missing);
  bind(nv, a.nvrtcDestroyProgram, "nvrtcDestroyProgram", missing);
  bind(nv, a.nvrtcGetErrorString, "nvrtcGetErrorString", missing);
  if (!missing.empty()) {
    r.why = "NVRTC lacks the entry point " + missing;
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace

const Api* api(std::string* why) {
  static std::once_flag once;
  static Loaded* loaded = nullptr;
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

void check(int rc, const char* what) {
  if (rc == 0) return;
  const char* s = nullptr;
  if (const Api* a = api(); a && a->cuGetErrorString) a->cuGetErrorString(rc, &s);
  throw Error(std::string("kiln.cuda: ") + what + " failed with error " + std::to_string(rc) +
              (s ? std::string(" (") + s + ")" : ""));
}

}  // namespace kiln::runtime::cuda
