// CUDA events around timed work (see timer_events.h).
#include "runtime/cuda/timer_events.h"

#include "runtime/cuda/context.h"

namespace kiln::runtime::cuda {

namespace {
class EventTimer : public Timer {
 public:
  explicit EventTimer(int ordinal) : ordinal_(ordinal) {
    const Context& c = context(ordinal_);
    check(c.api->cuEventCreate(&start_, 0), "cuEventCreate");
    if (int rc = c.api->cuEventCreate(&stop_, 0)) {
      c.api->cuEventDestroy(start_);
      check(rc, "cuEventCreate");
    }
  }
  ~EventTimer() override {
    const Context& c = context(ordinal_);
    c.api->cuEventDestroy(start_);
    c.api->cuEventDestroy(stop_);
  }
  void start() override {
    const Context& c = context(ordinal_);
    check(c.api->cuEventRecord(start_, c.stream), "cuEventRecord");
  }
  double stop_ms() override {
    const Context& c = context(ordinal_);
    check(c.api->cuEventRecord(stop_, c.stream), "cuEventRecord");
    check(c.api->cuEventSynchronize(stop_), "cuEventSynchronize");
    float ms = 0;
    check(c.api->cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
    finish_queued(ordinal_);
    return ms;
  }

 private:
  int ordinal_;
  CUevent start_ = nullptr, stop_ = nullptr;
};
}  // namespace

std::unique_ptr<Timer> event_timer(int ordinal) { return std::make_unique<EventTimer>(ordinal); }

}  // namespace kiln::runtime::cuda
