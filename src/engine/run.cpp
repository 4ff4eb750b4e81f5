// The run stage (see stages.h).
#include <chrono>
#include <cstdio>

#include "engine/launch_observer.h"
#include "engine/stages.h"
#include "engine/validate.h"
#include "engine/viz.h"
#include "kiln/debug.h"

namespace kiln::engine {

void run(const schedule::Schedule& s, const Lowerings& lowered, std::vector<Bound>& bound, const Memory& m,
         runtime::Backend& b, viz::Record* rec) {
  bool profile = settings().profile && !s.kernels.empty();
  std::unique_ptr<runtime::Timer> timer = profile ? b.timer() : nullptr;
  if (timer) timer->start();
  for (size_t i = 0; i < s.kernels.size(); i++) {
    const auto& k = s.kernels[i];
    const auto& p = lowered[i]->program;
    const std::vector<std::shared_ptr<Buffer>>& outs = m.buffers.outs[i];
    if (LaunchObserver* obs = launch_observer()) {
      std::vector<std::shared_ptr<Buffer>> ins;
      for (auto& in : k.inputs) ins.push_back(in->buffer);
      obs->launched(bound[i].launch, outs, ins);
    }
    bool time_each = settings().debug >= 2 || rec;
    if (time_each) b.synchronize();  // time this kernel alone
    auto k0 = std::chrono::steady_clock::now();
    b.launcher().launch(bound[i].launch, bound[i].args.data());
    if (time_each) b.synchronize();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
    if (rec) rec->kernel_time(i, sec * 1e3, bound[i].bytes);
    if (settings().debug >= 2) {
      std::fprintf(stderr, "kiln:   %-28s %9.3f ms %9.2f GB/s %9.2f GFLOP/s\n", p.name.c_str(), sec * 1e3,
                   static_cast<double>(bound[i].bytes) / sec * 1e-9, p.flops / sec * 1e-9);
    }
    if (settings().validate) validate(k, p, outs);
  }
  if (timer) stats().device_ms += timer->stop_ms();
}

}  // namespace kiln::engine
