// The thread's launch observer (see launch_observer.h).
#include "engine/launch_observer.h"

namespace kiln::engine {

LaunchObserver*& launch_observer() {
  thread_local LaunchObserver* o = nullptr;
  return o;
}

}  // namespace kiln::engine
