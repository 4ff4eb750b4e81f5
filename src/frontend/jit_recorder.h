// What kiln::Jit records while a call of its function runs (src/frontend/jit.cpp): each kernel
// launch with its buffers (seen from the realize driver), the tensors assign_ changes (with the
// buffer they held before) and the tensors realize binds to buffers.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/launch_observer.h"
#include "frontend/tensor_impl.h"
#include "runtime/buffer.h"
#include "runtime/launcher.h"

namespace kiln::jit {

struct Recording : engine::LaunchObserver {
  struct Launched {
    runtime::Launch launch;
    std::vector<std::shared_ptr<Buffer>> outputs, inputs;
  };
  int64_t first_new_id = Buffer::next_id();  // buffers with smaller ids existed before the call
  std::vector<Launched> launches;
  // the first assign_ of each tensor in the call, with the buffer it held before (null if lazy)
  std::vector<std::pair<std::weak_ptr<Tensor::Impl>, std::shared_ptr<Buffer>>> assigned;
  std::vector<std::weak_ptr<Tensor::Impl>> realized;
  std::vector<std::function<void()>> host_effects;  // kiln::on_jit_replay: run again by each replay

  void launched(const runtime::Launch& l, const std::vector<std::shared_ptr<Buffer>>& outputs,
                const std::vector<std::shared_ptr<Buffer>>& inputs) override {
    launches.push_back({l, outputs, inputs});
  }
  // references to b in the launches and assignments recorded (to buffers, never their contents)
  long holds(const Buffer& b) const override {
    long n = 0;
    for (auto& l : launches) {
      for (auto& o : l.outputs) n += o.get() == &b;
      for (auto& i : l.inputs) n += i.get() == &b;
    }
    for (auto& a : assigned) n += a.second.get() == &b;
    return n;
  }
  void assigning(const std::shared_ptr<Tensor::Impl>& impl) {
    for (auto& [w, b] : assigned)
      if (w.lock() == impl) return;
    assigned.emplace_back(impl, impl->node->buffer);
  }
};

// The recording of the call running on this thread, or nullptr.
Recording*& active();

// Installs a recording for the lifetime of the scope.
class RecordingScope {
 public:
  explicit RecordingScope(Recording& r);
  ~RecordingScope();
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  Recording* prev_;
  engine::LaunchObserver* prev_observer_;
};

}  // namespace kiln::jit
