// The CPU backend's launch threads and their watchdog. The launching thread hands the launch's
// workers to threads of the tile backend's own (not the runtime's pool: a thread may never come
// back) and watches them: when no role made progress for KILN_TILE_TIMEOUT_MS while some role runs
// kernel code (a loop that never reaches the runtime, or one that polls a value nothing changes),
// the launch fails with every role's state. Kernel code cannot be interrupted safely, so a thread
// still in it is left running: it owns the launch from then on (nothing it can touch is ever
// freed), and its role ends at its next runtime call, which finds the launch failed.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <system_error>
#include <thread>

#include "kiln/error.h"
#include "runtime/thread_pool.h"
#include "tile/cpu/launch_state.h"

namespace kiln::tile::cpu {

namespace {

std::atomic<int> abandoned_running{0};

// Threads for launches' workers, kept between launches (starting a thread costs more than a small
// launch): each runs one task at a time and then waits for the next. A thread the watchdog left in
// kernel code is free again once its task ends.
class LaunchThreads {
 public:
  // Runs task on an idle thread, or a new one; std::system_error when none can be started.
  void run(std::function<void()> task) {
    std::lock_guard<std::mutex> l(mu_);
    if (idle_.empty()) {
      auto t = std::make_unique<Slot>();
      t->task = std::move(task);
      Slot* p = t.get();
      std::thread(&LaunchThreads::loop, this, p).detach();  // waits for mu_ before it looks
      slots_.push_back(std::move(t));
      return;
    }
    Slot* t = idle_.back();
    idle_.pop_back();
    t->task = std::move(task);
    t->cv.notify_one();
  }

 private:
  struct Slot {
    std::condition_variable cv;
    std::function<void()> task;
  };
  void loop(Slot* t) {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      t->cv.wait(l, [&] { return t->task != nullptr; });
      std::function<void()> task = std::move(t->task);
      t->task = nullptr;
      l.unlock();
      task();
      task = nullptr;
      l.lock();
      idle_.push_back(t);
    }
  }
  std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> idle_;
};

// Never destroyed: its threads wait on it until the process ends. A child process made by fork()
// has none of them, so it starts a set of its own.
LaunchThreads*& launch_threads_of_this_process() {
  static LaunchThreads* t = [] {
    pthread_atfork(nullptr, nullptr, [] { launch_threads_of_this_process() = new LaunchThreads(); });
    return new LaunchThreads();
  }();
  return t;
}
LaunchThreads& launch_threads() { return *launch_threads_of_this_process(); }

// Launches given up on: kept for the process's lifetime, since their threads may still use them.
void keep_forever(std::unique_ptr<Launch> L) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<Launch>>();
  std::lock_guard<std::mutex> l(mu);
  kept->push_back(std::move(L));
}

int running_roles(const Launch& L) {
  int n = 0;
  for (auto& f : L.fibers) n += f->state == Fiber::Running;
  return n;
}

// With L.mu held: the launch made no progress for `ms` ms.
void report_stall(Launch& L, long long ms) {
  std::string roles;
  for (auto& f : L.fibers)
    if (f->state == Fiber::Running || f->state == Fiber::Blocked || f->state == Fiber::Runnable)
      roles += "\n  " + core_name(L, *f->core) + " " + f->role + ": " + doing(L, *f);
  if (L.failed) {  // an error came first; some role's kernel code kept running after it
    L.error += "\n  (and no progress since for " + std::to_string(ms) + " ms:" + roles + ")";
    return;
  }
  set_error(L, "kiln.tile: no progress in kernel '" + L.desc.name + "' for " + std::to_string(ms) +
                   " ms (KILN_TILE_TIMEOUT_MS sets the limit): a role runs kernel code that never returns "
                   "to the runtime, or polls a value nothing changes:" +
                   roles);
}

// Waits until every started worker thread exited: true. False once the launch failed (or stalled)
// and every thread left runs kernel code that has not come back to the runtime for a while.
bool watch(Launch& L, int started, long long ms) {
  using Clock = std::chrono::steady_clock;
  const auto limit = std::chrono::milliseconds(ms);
  const auto step =
      std::clamp<Clock::duration>(limit / 8, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  std::unique_lock<std::mutex> lk(L.mu);
  uint64_t seen = L.epoch;
  auto progress = Clock::now(), woke = progress;
  bool stalled = false;
  while (L.exited < started) {
    L.done.wait_for(lk, step);
    const auto now = Clock::now();
    // woken far behind time: the whole process was stopped (a debugger, SIGSTOP), not the roles
    if (now - woke > limit / 2) progress = now;
    woke = now;
    if (L.epoch != seen) {
      seen = L.epoch;
      progress = now;
      continue;
    }
    if (!stalled && now - progress >= limit) {
      report_stall(L, ms);
      stalled = true;
      seen = L.epoch;
      progress = now;
      continue;
    }
    // after the stall, threads outside kernel code leave at once, the rest get two steps more; and
    // after as long again without any progress, whatever is left is given up on
    if (stalled && now - progress >= 2 * step && L.exited + running_roles(L) >= started) return false;
    if (stalled && now - progress >= limit) return false;
  }
  return true;
}

}  // namespace

int abandoned_threads_running() { return abandoned_running.load(); }

void run_cores(std::unique_ptr<Launch>& owned) {
  Launch& L = *owned;
  const int threads = std::max(1, std::min<int>(runtime::num_threads(), static_cast<int>(L.cores.size())));
  L.worker_exited.assign(static_cast<size_t>(threads), 0);
  L.live_workers = threads;
  int started = 0;
  try {
    for (; started < threads; started++)
      launch_threads().run([&L, i = started, threads] {
        worker_main(L, i, threads);
        std::lock_guard<std::mutex> lk(L.mu);  // the last touch of L: the launching thread may free it next
        L.worker_exited[static_cast<size_t>(i)] = 1;
        if (L.abandoned) abandoned_running--;
        L.exited++;
        L.done.notify_all();
      });
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> lk(L.mu);
    L.live_workers -= threads - started;
    set_error(L, "kiln.tile: kernel '" + L.desc.name + "': cannot start worker thread " +
                     std::to_string(started + 1) + " of " + std::to_string(threads) + ": " + e.what() +
                     " (KILN_THREADS sets how many a launch uses)");
  }
  if (watch(L, started, watchdog_ms(kCpuWatchdogMs))) {
    if (L.failed) throw Error(L.error);
    return;
  }
  // The threads still in kernel code get the launch: they may come back to the runtime (and end
  // their role) at any time, so it is never freed.
  std::string error;
  {
    std::lock_guard<std::mutex> lk(L.mu);
    const int stuck = started - L.exited;
    L.abandoned = true;
    abandoned_running += stuck;
    L.error += "\n  (" + std::to_string(stuck) +
               " worker thread(s) in kernel code were left running, since kernel code cannot be "
               "interrupted safely; they keep this launch's memory for the rest of the process and "
               "are free again once their role makes a runtime call)";
    error = L.error;
  }
  keep_forever(std::move(owned));
  throw Error(error);
}

}  // namespace kiln::tile::cpu
