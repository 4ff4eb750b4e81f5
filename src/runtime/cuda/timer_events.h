// The CUDA backend's Timer (runtime/backend.h): a pair of events recorded on a device's stream
// around the timed work; stop_ms waits for the stop event, then for the work queued without waiting
// (context.h: finish_queued), so a failed launch in the timed work is reported there.
#pragma once
#include <memory>

#include "runtime/backend.h"

namespace kiln::runtime::cuda {

// Creates both events on device `ordinal` (or throws a kiln::Error).
std::unique_ptr<Timer> event_timer(int ordinal);

}  // namespace kiln::runtime::cuda
