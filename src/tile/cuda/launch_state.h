// The CUDA backend of tile programs: compiling a program for the GPU and reading back the error
// log its kernel writes (the launch itself is src/tile/cuda/launch.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/tile/cuda_abi.h"
#include "runtime/buffer.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/context.h"
#include "tile/program_desc.h"

namespace kiln::tile::cuda {

// The full CUDA C++ NVRTC compiles: the generated source with the kernel headers pasted in.
std::string cuda_source(const Program::Desc& d);
// Compiles (or finds cached) the program's kernel for cuda:ordinal (src/tile/cuda/compile.cpp).
runtime::cuda::CUfunction compile(const Program::Desc& d, int ordinal);
// The kiln::Error message for a launch whose kernel logged failures, or "" when the log is empty
// (src/tile/cuda/errors.cpp). timeout_ms is the watchdog limit the launch ran with.
std::string describe_errors(const Program::Desc& d, const cuda_abi::ErrorLog& log, long long timeout_ms);
// How messages name a role (its index: data-movement roles, then compute), a CB and a semaphore
// (src/tile/cuda/errors.cpp).
std::string role_name(const Program::Desc& d, int role);
std::string cb_name(const Program::Desc& d, int i);
std::string semaphore_name(const Program::Desc& d, int i);
// Launches in flight (src/tile/cuda/in_flight.cpp). A launch takes a slot (pinned host memory the
// kernel reads its runtime args from and flags its first failure in, and a zeroed device error
// log), queues its kernel, then queue_check; the launch is checked once its kernel ran, at the
// latest by finish (which every wait of the host for the device calls), and a failed one's error
// thrown there.
struct LaunchSlot {
  int index;
  void* args;                              // host address of the runtime args
  runtime::cuda::CUdeviceptr args_device;  // the same memory as the kernel sees it
  runtime::cuda::CUdeviceptr flag_device;  // the failure flag, as the kernel sees it
  runtime::cuda::CUdeviceptr log;          // the device error log
};
LaunchSlot take_slot(runtime::cuda::Context& c, size_t arg_bytes);
// Gives back a slot whose launch was not queued.
void drop_slot(runtime::cuda::Context& c, const LaunchSlot& slot);
void queue_check(runtime::cuda::Context& c, const LaunchSlot& slot, std::shared_ptr<Program::Desc> desc,
                 std::vector<Tensor> inputs, std::shared_ptr<Buffer> scratch, long long timeout_ms);
// Waits for cuda:ordinal's launches in flight; throws the first failed one's error.
void finish(int ordinal);
// The summary of a KILN_TILE_TRACE timeline: the records kept (in any order) and how many the
// kernel made (src/tile/cuda/trace.cpp).
std::string describe_trace(const Program::Desc& d, int core, const std::vector<unsigned long long>& records,
                           unsigned long long recorded);

}  // namespace kiln::tile::cuda
