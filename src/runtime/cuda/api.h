// The CUDA driver and NVRTC entry points kiln uses, loaded at run time with dlopen so one build runs
// with and without a GPU. Types are the plain integers and pointers of the C APIs. (cuBLASLt has its
// own table: runtime/cuda/cublaslt.cpp.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

using CUdeviceptr = uint64_t;
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUgraph = void*;
using CUgraphExec = void*;
using CUgraphNode = void*;

// CUlaunchAttribute and CUlaunchConfig (cuda.h): a launch with attributes (cuLaunchKernelEx). The
// value is a 64-byte union; kiln sets two of its members: `cooperative` (an int, attribute 2) and
// the cluster shape (three unsigned, attribute 4).
struct CUlaunchAttribute {
  int id;
  int pad;
  union {
    char bytes[64];
    int cooperative;
    unsigned cluster_dim[3];
  } value;
};
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  CUlaunchAttribute* attrs;
  unsigned num_attrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8);
static_assert(sizeof(CUlaunchConfig) == 56 && offsetof(CUlaunchConfig, attrs) == 40);
inline constexpr int kLaunchAttributeCooperative = 2;
inline constexpr int kLaunchAttributeClusterDimension = 4;

// CUgraphExecUpdateResultInfo (cuda.h): why cuGraphExecUpdate refused a graph
struct CUgraphExecUpdateResultInfo {
  int result;  // CUgraphExecUpdateResult
  CUgraphNode error_node, error_from_node;
};

struct Api {
  void* libcuda = nullptr;
  void* libnvrtc = nullptr;
  // driver
  int (*cuInit)(unsigned);
  int (*cuDriverGetVersion)(int*);
  int (*cuDeviceGetCount)(int*);
  int (*cuDeviceGet)(int*, int);
  int (*cuDeviceGetName)(char*, int, int);
  int (*cuDeviceGetAttribute)(int*, int, int);
  int (*cuDeviceTotalMem)(size_t*, int);
  int (*cuGetErrorString)(int, const char**);
  int (*cuDevicePrimaryCtxRetain)(CUcontext*, int);
  int (*cuCtxSetCurrent)(CUcontext);
  int (*cuCtxSynchronize)();
  int (*cuMemAlloc)(CUdeviceptr*, size_t);
  int (*cuMemFree)(CUdeviceptr);
  int (*cuMemGetInfo)(size_t*, size_t*);
  int (*cuMemHostAlloc)(void**, size_t, unsigned);
  int (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  int (*cuMemFreeHost)(void*);
  int (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  int (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  int (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  int (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  int (*cuStreamCreate)(CUstream*, unsigned);
  int (*cuStreamSynchronize)(CUstream);
  int (*cuEventQuery)(CUevent);  // optional (null when missing)
  int (*cuEventCreate)(CUevent*, unsigned);
  int (*cuEventRecord)(CUevent, CUstream);
  int (*cuEventSynchronize)(CUevent);
  int (*cuEventElapsedTime)(float*, CUevent, CUevent);
  int (*cuEventDestroy)(CUevent);
  int (*cuModuleLoadData)(CUmodule*, const void*);
  int (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  int (*cuFuncSetAttribute)(CUfunction, int, int);
  int (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void**, void**);
  // optional (null when the driver lacks it): a launch whose blocks are all resident at once
  int (*cuLaunchCooperativeKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, CUstream, void**);
  // optional (null before CUDA 12): a launch with attributes (thread-block clusters)
  int (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  // optional (null before CUDA 12): a 2D (or higher) tensor map for the bulk tensor copy engine;
  // the enums are passed as their integer values
  int (*cuTensorMapEncodeTiled)(void* map, int data_type, unsigned rank, void* address,
                                const unsigned long long* dims, const unsigned long long* strides,
                                const unsigned* box, const unsigned* element_strides, int interleave,
                                int swizzle, int l2_promotion, int oob_fill);
  // CUDA graphs (runtime/cuda/graph.cpp); mode is a CUstreamCaptureMode
  int (*cuStreamBeginCapture)(CUstream, int mode);
  int (*cuStreamEndCapture)(CUstream, CUgraph*);
  int (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
  int (*cuGraphLaunch)(CUgraphExec, CUstream);
  int (*cuGraphExecDestroy)(CUgraphExec);
  int (*cuGraphDestroy)(CUgraph);
  int (*cuGraphGetNodes)(CUgraph, CUgraphNode*, size_t*);
  // optional (null before CUDA 12): updates an executable graph in place to a graph of the same shape
  int (*cuGraphExecUpdate)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*);
  // NVRTC (nvrtcResult is an int; 0 is success)
  int (*nvrtcVersion)(int*, int*);
  int (*nvrtcCreateProgram)(void**, const char*, const char*, int, const char* const*, const char* const*);
  int (*nvrtcCompileProgram)(void*, int, const char* const*);
  int (*nvrtcGetProgramLogSize)(void*, size_t*);
  int (*nvrtcGetProgramLog)(void*, char*);
  int (*nvrtcGetCUBINSize)(void*, size_t*);
  int (*nvrtcGetCUBIN)(void*, char*);
  int (*nvrtcDestroyProgram)(void**);
  const char* (*nvrtcGetErrorString)(int);
};

// dlopen()s the first of `names` that loads (empty names are skipped); nullptr when none does, with
// the names tried appended to `tried`, comma-separated.
void* open_first(const std::vector<std::string>& names, std::string& tried);
// The value of an environment variable, "" when unset.
std::string env(const char* name);
// dlsym(lib, name), nullptr when absent.
void* symbol(void* lib, const char* name);
// Resolves `name` into the function pointer `fn`; records the first missing symbol in `missing`.
template <class F>
void bind(void* lib, F& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<F>(symbol(lib, name));
  if (!fn && missing.empty()) missing = name;
}

// Loads the libraries and resolves every entry point once; nullptr (and `why`) when unavailable.
const Api* api(std::string* why = nullptr);
// Throws kiln::Error "kiln.cuda: <what> failed: <driver message>" when rc is not success.
void check(int rc, const char* what);

}  // namespace kiln::runtime::cuda
