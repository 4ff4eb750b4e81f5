// CUDA events for kiln::DeviceTimer (see timer_events.h).
#include "runtime/cuda/timer_events.h"

#include "runtime/cuda/context.h"

namespace kiln::runtime::cuda {

void create_timer_events(int index, void*& start, void*& stop) {
  const Context& c = context(index);
  check(c.api->cuEventCreate(&start, 0), "cuEventCreate");
  if (int rc = c.api->cuEventCreate(&stop, 0)) {
    c.api->cuEventDestroy(start);
    check(rc, "cuEventCreate");
  }
}

void destroy_timer_events(int index, void* start, void* stop) {
  const Context& c = context(index);
  c.api->cuEventDestroy(start);
  c.api->cuEventDestroy(stop);
}

void record_timer_start(int index, void* start) {
  const Context& c = context(index);
  check(c.api->cuEventRecord(start, c.stream), "cuEventRecord");
}

float timer_elapsed_ms(int index, void* start, void* stop) {
  const Context& c = context(index);
  check(c.api->cuEventRecord(stop, c.stream), "cuEventRecord");
  check(c.api->cuEventSynchronize(stop), "cuEventSynchronize");
  float ms = 0;
  check(c.api->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  return ms;
}

}  // namespace kiln::runtime::cuda
