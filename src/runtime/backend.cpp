// The backend registry (see backend.h): one factory per device kind, one backend per device; and
// what the backends share.
#include "runtime/backend.h"

#include <map>
#include <mutex>
#include <utility>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {
struct Registry {
  std::mutex mu;
  std::map<Device::Kind, MakeBackend> makers;
  std::map<std::pair<Device::Kind, int>, std::unique_ptr<Backend>> made;
};

Registry& registry() {
  static Registry* r = new Registry();  // backends outlive static destructors that free buffers
  return *r;
}
}  // namespace

bool register_backend(Device::Kind kind, MakeBackend make) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return r.makers.emplace(kind, make).second;
}

Backend& backend(Device d) {
  // every buffer asks on allocation and release: a thread keeps the last answer (backends live on)
  thread_local Device last_device;
  thread_local Backend* last = nullptr;
  if (last && last_device == d) return *last;
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto key = std::make_pair(d.kind, d.index);
  auto it = r.made.find(key);
  if (it == r.made.end()) {
    auto make = r.makers.find(d.kind);
    if (make == r.makers.end()) throw Error("kiln: no backend is registered for device " + d.str());
    it = r.made.emplace(key, make->second(d.index)).first;  // make throws, naming d, when it cannot
  }
  last_device = d;
  last = it->second.get();
  return *last;
}

std::vector<KernelSource> kernel_sources(
    const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered) {
  std::vector<KernelSource> out;
  for (auto& l : lowered) out.push_back({l->program.name, l->program.symbol, l->source});
  return out;
}

std::vector<Backend*> backends_in_use() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<Backend*> all;
  for (auto& [key, b] : r.made) all.push_back(b.get());
  return all;
}

}  // namespace kiln::runtime
