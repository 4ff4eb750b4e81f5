// kiln::DeviceTimer: the device backend's timer (events on a GPU's stream, the wall clock on the CPU).
#include "kiln/device.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln {

DeviceTimer::DeviceTimer(Device d) : device_(d), timer_(runtime::backend(d).timer()) {}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() {
  timer_->start();
  started_ = true;
}

double DeviceTimer::stop_ms() {
  if (!started_) throw Error("kiln: DeviceTimer::stop_ms on " + device_.str() + ": start() was not called");
  started_ = false;
  return timer_->stop_ms();
}

}  // namespace kiln
