// CUDA contexts and streams (see context.h).
#include "runtime/cuda/context.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/error.h"

namespace kiln::runtime::cuda {

namespace {
// CUdevice_attribute values
constexpr int kAttrMaxThreadsPerBlock = 1, kAttrSharedPerBlockOptin = 97, kAttrL2CacheSize = 38;
constexpr unsigned kStreamNonBlocking = 1;

std::unique_ptr<Context> create(int ordinal) {
  const Availability& av = availability();
  if (!av.available)
    throw Error("kiln.cuda: CUDA is not available: " + av.reason +
                " (asked for cuda:" + std::to_string(ordinal) + ")");
  if (ordinal < 0 || ordinal >= static_cast<int>(av.devices.size()))
    throw Error("kiln.cuda: no device cuda:" + std::to_string(ordinal) + " (this machine has " +
                std::to_string(av.devices.size()) + ")");
  auto c = std::make_unique<Context>();
  c->api = api();
  c->ordinal = ordinal;
  c->info = av.devices[static_cast<size_t>(ordinal)];
  int dev = 0;
  check(c->api->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  check(c->api->cuDevicePrimaryCtxRetain(&c->ctx, dev), "cuDevicePrimaryCtxRetain");
  check(c->api->cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent");
  check(c->api->cuStreamCreate(&c->stream, kStreamNonBlocking), "cuStreamCreate");
  c->api->cuDeviceGetAttribute(&c->max_threads_per_block, kAttrMaxThreadsPerBlock, dev);
  c->api->cuDeviceGetAttribute(&c->shared_per_block_optin, kAttrSharedPerBlockOptin, dev);
  c->api->cuDeviceGetAttribute(&c->l2_bytes, kAttrL2CacheSize, dev);
  c->arch = "sm_" + std::to_string(c->info.major) + std::to_string(c->info.minor);
  return c;
}
}  // namespace

Context& context(int ordinal) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Context>>* all = new std::vector<std::unique_ptr<Context>>();
  thread_local CUcontext current = nullptr;
  Context* c = nullptr;
  {
    std::lock_guard<std::mutex> l(mu);
    if (ordinal >= 0 && static_cast<size_t>(ordinal) < all->size() && (*all)[static_cast<size_t>(ordinal)])
      c = (*all)[static_cast<size_t>(ordinal)].get();
    else {
      auto made = create(ordinal);
      if (all->size() <= static_cast<size_t>(ordinal)) all->resize(static_cast<size_t>(ordinal) + 1);
      c = made.get();
      (*all)[static_cast<size_t>(ordinal)] = std::move(made);
    }
  }
  if (current != c->ctx) {
    check(c->api->cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent");
    current = c->ctx;
  }
  return *c;
}

namespace {
std::atomic<FinishQueued> finish_hook{nullptr};
}  // namespace

void set_finish_queued(FinishQueued finish) { finish_hook = finish; }
void finish_queued(int ordinal) {
  if (FinishQueued f = finish_hook.load()) f(ordinal);
}

bool& capturing_on_this_thread() {
  thread_local bool capturing = false;
  return capturing;
}

void refuse_while_capturing(const char* what) {
  if (capturing_on_this_thread())
    throw Error(std::string("kiln.cuda: ") + what +
                " cannot run while this thread captures a CUDA graph (the capture would be invalidated)");
}

void synchronize(int ordinal) {
  refuse_while_capturing("synchronize");
  finish_queued(ordinal);
  Context& c = context(ordinal);
  check(c.api->cuStreamSynchronize(c.stream), "cuStreamSynchronize");
}

namespace {
struct Timer {
  CUevent start = nullptr, stop = nullptr;
};
Timer& timer(Context& c) {
  static Timer timers[64];
  Timer& t = timers[c.ordinal & 63];
  if (!t.start) {
    check(c.api->cuEventCreate(&t.start, 0), "cuEventCreate");
    check(c.api->cuEventCreate(&t.stop, 0), "cuEventCreate");
  }
  return t;
}
}  // namespace

void timer_start(int ordinal) {
  Context& c = context(ordinal);
  check(c.api->cuEventRecord(timer(c).start, c.stream), "cuEventRecord");
}

double timer_stop_ms(int ordinal) {
  Context& c = context(ordinal);
  Timer& t = timer(c);
  check(c.api->cuEventRecord(t.stop, c.stream), "cuEventRecord");
  check(c.api->cuEventSynchronize(t.stop), "cuEventSynchronize");
  float ms = 0;
  check(c.api->cuEventElapsedTime(&ms, t.start, t.stop), "cuEventElapsedTime");
  return ms;
}

}  // namespace kiln::runtime::cuda
