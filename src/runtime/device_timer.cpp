// kiln::DeviceTimer: events on the device's stream on a GPU, the wall clock on the CPU.
#include "kiln/device.h"
#include "kiln/error.h"
#include "runtime/cuda/context.h"

namespace kiln {

DeviceTimer::DeviceTimer(Device d) : device_(d) {
  if (!d.is_cuda()) return;
  const runtime::cuda::Context& c = runtime::cuda::context(d.index);
  runtime::cuda::check(c.api->cuEventCreate(&start_event_, 0), "cuEventCreate");
  if (int rc = c.api->cuEventCreate(&stop_event_, 0)) {
    c.api->cuEventDestroy(start_event_);
    runtime::cuda::check(rc, "cuEventCreate");
  }
}

DeviceTimer::~DeviceTimer() {
  if (!device_.is_cuda()) return;
  const runtime::cuda::Context& c = runtime::cuda::context(device_.index);
  c.api->cuEventDestroy(start_event_);
  c.api->cuEventDestroy(stop_event_);
}

void DeviceTimer::start() {
  if (device_.is_cuda()) {
    const runtime::cuda::Context& c = runtime::cuda::context(device_.index);
    runtime::cuda::check(c.api->cuEventRecord(start_event_, c.stream), "cuEventRecord");
  } else {
    t0_ = std::chrono::steady_clock::now();
  }
  started_ = true;
}

double DeviceTimer::stop_ms() {
  if (!started_) throw Error("kiln: DeviceTimer::stop_ms on " + device_.str() + ": start() was not called");
  started_ = false;
  if (!device_.is_cuda())
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  const runtime::cuda::Context& c = runtime::cuda::context(device_.index);
  runtime::cuda::check(c.api->cuEventRecord(stop_event_, c.stream), "cuEventRecord");
  runtime::cuda::check(c.api->cuEventSynchronize(stop_event_), "cuEventSynchronize");
  float ms = 0;
  runtime::cuda::check(c.api->cuEventElapsedTime(&ms, start_event_, stop_event_), "cuEventElapsedTime");
  runtime::cuda::finish_queued(device_.index);  // a failed launch in the timed work is reported here
  return ms;
}

}  // namespace kiln
