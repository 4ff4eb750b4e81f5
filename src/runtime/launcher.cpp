// The CPU launcher and the replay of a launch list (see launcher.h).
#include "runtime/launcher.h"

#include <cstring>

#include "kiln/debug.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

void Launcher::replay(const std::vector<SlotLaunch>& list, const std::vector<void*>& slots,
                      std::unique_ptr<ReplayState>&) {
  std::vector<void*> args;
  for (const SlotLaunch& s : list) {
    args.clear();
    for (int32_t a : s.args) args.push_back(slots[static_cast<size_t>(a)]);
    launch(s.launch, args.data());
  }
}

namespace {
class CpuLauncher : public Launcher {
 public:
  void launch(const Launch& l, void** args) override {
    KernelFn fn = l.fn;
    if (l.zero_bytes > 0) std::memset(args[0], 0, static_cast<size_t>(l.zero_bytes));
    if (l.parallel)
      parallel_for(l.outer_size, [&](int64_t s, int64_t e) { fn(args, s, e); });
    else
      fn(args, 0, l.outer_size);
    stats().kernels_run++;
  }
};
}  // namespace

Launcher& cpu_launcher() {
  static CpuLauncher l;
  return l;
}

Launcher& launcher(Device d) { return d.is_cuda() ? cuda_launcher() : cpu_launcher(); }

LaunchObserver*& launch_observer() {
  thread_local LaunchObserver* o = nullptr;
  return o;
}

}  // namespace kiln::runtime
