// kiln::DeviceTimer: events on the device's stream on a GPU, the wall clock on the CPU.
#include "kiln/device.h"
#include "kiln/error.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/timer_events.h"

namespace kiln {

DeviceTimer::DeviceTimer(Device d) : device_(d) {
  if (d.is_cuda()) runtime::cuda::create_timer_events(d.index, start_event_, stop_event_);
}

DeviceTimer::~DeviceTimer() {
  if (device_.is_cuda()) runtime::cuda::destroy_timer_events(device_.index, start_event_, stop_event_);
}

void DeviceTimer::start() {
  if (device_.is_cuda())
    runtime::cuda::record_timer_start(device_.index, start_event_);
  else
    t0_ = std::chrono::steady_clock::now();
  started_ = true;
}

double DeviceTimer::stop_ms() {
  if (!started_) throw Error("kiln: DeviceTimer::stop_ms on " + device_.str() + ": start() was not called");
  started_ = false;
  if (!device_.is_cuda())
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  float ms = runtime::cuda::timer_elapsed_ms(device_.index, start_event_, stop_event_);
  runtime::cuda::finish_queued(device_.index);  // a failed launch in the timed work is reported here
  return ms;
}

}  // namespace kiln
