// Device-side checks (see checks.h).
#include "frontend/checks.h"

#include <memory>
#include <mutex>
#include <utility>

#include "kiln/error.h"
#include "kiln/jit.h"

namespace kiln::frontend {

namespace {
struct Registry {
  std::mutex mu;
  std::vector<PendingCheck> pending;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
}  // namespace

void require(const Tensor& ok, std::string message) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    r.pending.push_back({ok, message});
  }
  // a replay binds `ok` to the step's new result; checked once the replay's kernels are queued
  on_jit_replay([ok, message] { verify({{ok, message}}); });
}

std::vector<PendingCheck> take_checks() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return std::exchange(r.pending, {});
}

void verify(const std::vector<PendingCheck>& checks) {
  for (auto& c : checks)
    if (!c.ok.item<bool>()) throw Error("kiln." + c.message);
}

}  // namespace kiln::frontend
