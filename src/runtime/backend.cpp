// The backend registry (see backend.h): one factory per device kind, one backend per device.
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
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto key = std::make_pair(d.kind, d.index);
  if (auto it = r.made.find(key); it != r.made.end()) return *it->second;
  auto make = r.makers.find(d.kind);
  if (make == r.makers.end()) throw Error("kiln: no backend is registered for device " + d.str());
  std::unique_ptr<Backend> b = make->second(d.index);  // throws, naming d, when it cannot use it
  return *r.made.emplace(key, std::move(b)).first->second;
}

std::vector<Backend*> backends_in_use() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<Backend*> all;
  for (auto& [key, b] : r.made) all.push_back(b.get());
  return all;
}

}  // namespace kiln::runtime
