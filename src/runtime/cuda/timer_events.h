// The CUDA side of kiln::DeviceTimer: a pair of events recorded on a device's stream around the
// timed work, so the timer itself (src/runtime/device_timer.cpp) calls no driver function.
#pragma once

namespace kiln::runtime::cuda {

// Creates the start and stop events on device `index` (both, or neither and a kiln::Error).
void create_timer_events(int index, void*& start, void*& stop);
void destroy_timer_events(int index, void* start, void* stop);
void record_timer_start(int index, void* start);  // on the device's stream
// Records `stop` on the stream, waits for it and returns the milliseconds from `start` to `stop`.
float timer_elapsed_ms(int index, void* start, void* stop);

}  // namespace kiln::runtime::cuda
