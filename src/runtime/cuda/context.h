// One CUDA device in use: its primary context, the stream kiln queues all work on, and the limits
// kernels are sized by. Created on first use; every thread that touches the device makes it current.
#pragma once
#include <string>

#include "runtime/cuda/api.h"
#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda {

struct Context {
  const Api* api = nullptr;
  int ordinal = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  DeviceInfo info;
  int max_threads_per_block = 1024;
  int shared_per_block_optin = 48 * 1024;
  int l2_bytes = 0;
  std::string arch;  // "sm_90"
};

// The context of cuda:ordinal, current on the calling thread. Throws kiln::Error saying why CUDA is
// unavailable (no driver, no device, no NVRTC) or that the ordinal does not exist.
Context& context(int ordinal);
// Waits for the device's stream.
void synchronize(int ordinal);
// Whether this thread is capturing a CUDA graph (graph.cpp): calls that would break the capture
// (waiting, copies through the host, allocating) throw a kiln::Error naming `what` instead.
bool& capturing_on_this_thread();
void refuse_while_capturing(const char* what);
// Work queued without waiting whose outcome is read back later (the tile launches' error logs):
// `finish` waits for it and throws its errors. synchronize, upload and download call it first, so
// a failure surfaces at the next point the host waits for the device.
using FinishQueued = void (*)(int ordinal);
void set_finish_queued(FinishQueued finish);
void finish_queued(int ordinal);
// Device time of the work queued on the stream between timer_start and timer_stop_ms (which waits).
void timer_start(int ordinal);
double timer_stop_ms(int ordinal);

}  // namespace kiln::runtime::cuda
