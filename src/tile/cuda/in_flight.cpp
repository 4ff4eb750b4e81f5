// Tile launches in flight on a GPU: a launch returns once its kernel is queued, like any other GPU
// work. Each launch takes a slot: pinned host memory the device reads and writes directly (the
// runtime args, and a flag the kernel sets at its first failure) and a device error log kept zeroed
// between uses, so a launch queues no copies of its own. The launch is checked when the host next
// waits for the device (runtime::cuda::synchronize, a copy to or from the device), when a later
// launch finds it done, or when its slot is needed again. A failed launch's error is thrown there,
// naming its program.
#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "kiln/error.h"
#include "runtime/cuda/copy.h"
#include "tile/cuda/launch_state.h"

namespace kiln::tile::cuda {

namespace {

namespace rc = runtime::cuda;

constexpr int kErrorNotReady = 600;     // CUDA_ERROR_NOT_READY
constexpr unsigned kEventNoTiming = 2;  // CU_EVENT_DISABLE_TIMING
constexpr unsigned kHostDeviceMap = 2;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr size_t kFlagBytes = 64;       // a slot's host memory: the failure flag, then the runtime args
constexpr size_t kMaxSlots = 64;        // launches in flight per device before one is waited for

struct Slot {
  void* host = nullptr;  // pinned, mapped for the device at `device`
  rc::CUdeviceptr device = 0;
  size_t capacity = 0;
  rc::CUdeviceptr log = 0;     // a cuda_abi::ErrorLog, zero whenever the slot is free
  rc::CUevent done = nullptr;  // recorded after the launch
  bool busy = false;
};

struct Pending {
  int slot;
  std::shared_ptr<Program::Desc> desc;
  std::vector<Tensor> inputs;       // alive until the kernel ran
  std::shared_ptr<Buffer> scratch;  // the launch's semaphores and multicast state, if any
  long long timeout_ms;
};

struct Queue {
  std::mutex mu;
  std::vector<Slot> slots;
  std::deque<Pending> pending;
};

Queue& queue(int ordinal) {
  static Queue queues[64];
  return queues[ordinal & 63];
}

thread_local bool checking = false;  // reading a failed launch's log: a copy that must not recurse

[[noreturn]] void fail(const Program::Desc& d, const std::string& msg) {
  throw Error("kiln.tile: program '" + d.name + "' on CUDA: " + msg);
}

bool done(rc::Context& c, const Slot& s) {
  if (!c.api->cuEventQuery) return false;
  int r = c.api->cuEventQuery(s.done);
  if (r == kErrorNotReady) return false;
  rc::check(r, "the tile kernel");
  return true;
}

// Waits for a launch; a kernel still running long after its own watchdog should have stopped it is
// reported instead of hanging the process (the device stays busy with it). Polls without sleeping
// for the first millisecond, then every 200 us.
void wait(rc::Context& c, const Slot& s, const Pending& p) {
  if (!c.api->cuEventQuery) {
    rc::check(c.api->cuEventSynchronize(s.done), ("the tile kernel '" + p.desc->name + "'").c_str());
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::milliseconds(4 * p.timeout_ms + 30000);
  while (!done(c, s)) {
    auto waited = std::chrono::steady_clock::now() - start;
    if (waited > limit)
      fail(*p.desc,
           "the kernel is still running " + std::to_string(limit.count() / 1000) +
               " s after the host began to wait for it although its watchdog stops every wait after " +
               std::to_string(p.timeout_ms) +
               " ms: kernel code looping without reaching a watched wait, or a hang in kiln's CUDA tile "
               "backend");
    if (waited > std::chrono::milliseconds(1))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    else
      std::this_thread::yield();
  }
}

// Checks queued launches in order: those done (all of them with `block`); throws the first error.
void retire(Queue& q, rc::Context& c, int ordinal, bool block) {
  while (!q.pending.empty()) {
    Pending& p = q.pending.front();
    Slot& s = q.slots[static_cast<size_t>(p.slot)];
    if (block)
      wait(c, s, p);
    else if (!done(c, s))
      return;
    const bool logged = static_cast<const volatile unsigned*>(s.host)[0] != 0;
    Pending finished = std::move(p);
    q.pending.pop_front();
    if (!logged) {
      s.busy = false;
      continue;
    }
    cuda_abi::ErrorLog log;  // records: fetch the whole log, then zero it for the slot's next launch
    checking = true;
    try {
      rc::download(ordinal, &log, s.log, sizeof log);
      rc::check(c.api->cuMemsetD8Async(s.log, 0, sizeof log, c.stream), "cuMemsetD8Async");
    } catch (...) {
      checking = false;
      throw;
    }
    checking = false;
    s.busy = false;
    if (std::string msg = describe_errors(*finished.desc, log, finished.timeout_ms); !msg.empty())
      throw Error(msg);
  }
}

void finish_hook(int ordinal) {
  if (!checking) finish(ordinal);
}

}  // namespace

LaunchSlot take_slot(rc::Context& c, size_t arg_bytes) {
  static std::once_flag hooked;
  std::call_once(hooked, [] { rc::set_finish_queued(finish_hook); });
  Queue& q = queue(c.ordinal);
  std::lock_guard<std::mutex> l(q.mu);
  retire(q, c, c.ordinal, false);
  const size_t need = kFlagBytes + arg_bytes;
  auto hand_out = [&](size_t i) {
    Slot& s = q.slots[i];
    s.busy = true;
    static_cast<volatile unsigned*>(s.host)[0] = 0;
    return LaunchSlot{static_cast<int>(i), static_cast<char*>(s.host) + kFlagBytes, s.device + kFlagBytes,
                      s.device, s.log};
  };
  for (;;) {
    int small = -1;  // a free slot too small for these args
    for (size_t i = 0; i < q.slots.size(); i++) {
      Slot& s = q.slots[i];
      if (s.busy) continue;
      if (s.capacity < need) {
        small = static_cast<int>(i);
        continue;
      }
      return hand_out(i);
    }
    if (small >= 0 || q.slots.size() < kMaxSlots) {
      if (small < 0) {
        small = static_cast<int>(q.slots.size());
        q.slots.emplace_back();
      }
      Slot& s = q.slots[static_cast<size_t>(small)];
      if (s.host) c.api->cuMemFreeHost(s.host);
      s.host = nullptr;
      s.capacity = 0;
      if (!s.done) rc::check(c.api->cuEventCreate(&s.done, kEventNoTiming), "cuEventCreate");
      if (!s.log) {
        rc::check(c.api->cuMemAlloc(&s.log, sizeof(cuda_abi::ErrorLog)), "cuMemAlloc");
        rc::check(c.api->cuMemsetD8Async(s.log, 0, sizeof(cuda_abi::ErrorLog), c.stream), "cuMemsetD8Async");
      }
      // room for the largest args seen so far and some more, so slots are not remade as sizes alternate
      const size_t size = std::max<size_t>(2 * need, 8192);
      rc::check(c.api->cuMemHostAlloc(&s.host, size, kHostDeviceMap), "cuMemHostAlloc");
      rc::check(c.api->cuMemHostGetDevicePointer(&s.device, s.host, 0), "cuMemHostGetDevicePointer");
      s.capacity = size;
      return hand_out(static_cast<size_t>(small));
    }
    retire(q, c, c.ordinal, true);  // every slot busy: wait for the launches in flight
  }
}

void drop_slot(rc::Context& c, const LaunchSlot& slot) {
  Queue& q = queue(c.ordinal);
  std::lock_guard<std::mutex> l(q.mu);
  q.slots[static_cast<size_t>(slot.index)].busy = false;
}

void queue_check(rc::Context& c, const LaunchSlot& slot, std::shared_ptr<Program::Desc> desc,
                 std::vector<Tensor> inputs, std::shared_ptr<Buffer> scratch, long long timeout_ms) {
  Queue& q = queue(c.ordinal);
  std::lock_guard<std::mutex> l(q.mu);
  rc::check(c.api->cuEventRecord(q.slots[static_cast<size_t>(slot.index)].done, c.stream), "cuEventRecord");
  q.pending.push_back(
      Pending{slot.index, std::move(desc), std::move(inputs), std::move(scratch), timeout_ms});
}

void finish(int ordinal) {
  Queue& q = queue(ordinal);
  std::lock_guard<std::mutex> l(q.mu);
  if (q.pending.empty()) return;
  retire(q, rc::context(ordinal), ordinal, true);
}

}  // namespace kiln::tile::cuda
