// A fixed pool of worker threads; parallel_for hands out one chunk per worker.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include "ir/settings.h"
#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln::runtime {

namespace {

std::string kiln_threads_now() {
  const int t = settings().threads;
  return t > 0 ? "KILN_THREADS=" + std::to_string(t) : "KILN_THREADS unset: all hardware threads";
}

ThreadPool& pool() {
  static ThreadPool* p =
      new ThreadPool(num_threads());  // never joined at exit: kernels may run from static dtors
  return *p;
}

}  // namespace

int threads_setting(const char* text) {
  if (!text || !*text) return ir::hardware_threads();
  // the settings table's check of KILN_THREADS, the one place its range is known
  if (std::string e = ir::setting_error(*ir::find_setting("KILN_THREADS"), text); !e.empty()) throw Error(e);
  return std::atoi(text);
}

int num_threads() {
  const int t = settings().threads;  // KILN_THREADS, checked where read; a value set in code here
  return t > 0 ? threads_setting(std::to_string(t).c_str()) : ir::hardware_threads();
}

int pool_threads() { return pool().size(); }

ThreadPool::ThreadPool(int n) {
  try {
    for (int i = 1; i < n; i++) workers_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // the workers started so far wait on cv_: stop and join them before it goes away
    const size_t started = workers_.size();
    stop();
    throw Error("kiln: cannot start the thread pool's " + std::to_string(n) + " threads (" +
                kiln_threads_now() + "): thread " + std::to_string(started + 2) + " failed: " + e.what() +
                "; set KILN_THREADS to fewer threads");
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::call(const std::function<void(int)>& job, int chunk) {
  try {
    job(chunk);
  } catch (...) {
    std::lock_guard<std::mutex> l(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

namespace {

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker watches for the next job before it sleeps: a step's kernels follow each
// other within microseconds, and waking a sleeping thread costs tens of them.
constexpr int kSpins = 1 << 11;

}  // namespace

int ThreadPool::claim(uint32_t generation) {
  uint64_t v = next_.load(std::memory_order_acquire);
  while ((v >> 32) == generation && (v & 0xffffu) < ((v >> 16) & 0xffffu))
    if (next_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel))
      return static_cast<int>(v & 0xffffu);
  return -1;
}

void ThreadPool::run(int chunks, const std::function<void(int)>& job) {
  std::lock_guard<std::mutex> one_job(run_mu_);  // callers on other threads wait their turn
  const auto generation = static_cast<uint32_t>((next_.load() >> 32) + 1);
  {
    std::lock_guard<std::mutex> l(mu_);
    job_.store(&job, std::memory_order_relaxed);
    error_ = nullptr;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    // the calling thread takes chunk 0; the release publishes the job to workers that see it
    next_.store(uint64_t{generation} << 32 | static_cast<uint64_t>(chunks) << 16 | 1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  call(job, 0);
  for (int c; (c = claim(generation)) >= 0;) {  // help with the remaining chunks
    call(job, c);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
  for (int spin = 0; pending_.load(std::memory_order_acquire) > 0; spin++)  // the workers' last chunks
    if (spin < kSpins)
      pause();
    else
      std::this_thread::yield();
  std::lock_guard<std::mutex> l(mu_);
  job_.store(nullptr, std::memory_order_relaxed);
  if (std::exception_ptr e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
}

void ThreadPool::work() {
  uint32_t seen = 0;
  while (true) {
    uint64_t v = next_.load(std::memory_order_acquire);
    for (int spin = 0; (v >> 32) == seen && spin < kSpins; spin++) {
      pause();
      v = next_.load(std::memory_order_acquire);
    }
    if ((v >> 32) == seen) {  // no job came: sleep until one does
      std::unique_lock<std::mutex> l(mu_);
      sleepers_++;
      cv_.wait(l, [&] { return stop_ || (next_.load() >> 32) != seen; });
      sleepers_--;
      if (stop_) return;
      continue;
    }
    seen = static_cast<uint32_t>(v >> 32);
    // no lock: many workers taking one per kernel cost microseconds a launch
    const std::function<void(int)>* job = job_.load(std::memory_order_acquire);
    for (int c; (c = claim(seen)) >= 0;) {
      call(*job, c);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  int chunks = static_cast<int>(std::min<int64_t>(n, pool().size()));
  try {
    if (chunks <= 1) {
      if (n > 0) fn(0, n);
      return;
    }
    std::function<void(int)> job = [&](int c) {
      int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      if (lo < hi) fn(lo, hi);
    };
    pool().run(chunks, job);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error("kiln: out of memory in a thread of the runtime's pool (parallel_for)");
  } catch (const std::exception& e) {
    throw Error(std::string("kiln: a thread of the runtime's pool (parallel_for) failed: ") + e.what());
  }
}

}  // namespace kiln::runtime
