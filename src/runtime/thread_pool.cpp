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

void ThreadPool::run(int chunks, const std::function<void(int)>& job) {
  std::lock_guard<std::mutex> one_job(run_mu_);  // callers on other threads wait their turn
  std::unique_lock<std::mutex> l(mu_);
  job_ = &job;
  chunks_ = chunks;
  next_ = 1;  // the calling thread takes chunk 0
  pending_ = chunks - 1;
  generation_++;
  error_ = nullptr;
  l.unlock();
  cv_.notify_all();
  call(job, 0);
  while (true) {  // help with remaining chunks, then wait for the rest
    l.lock();
    if (next_ >= chunks_) break;
    int c = next_++;
    l.unlock();
    call(job, c);
    l.lock();
    pending_--;
    l.unlock();
  }
  done_cv_.wait(l, [this] { return pending_ == 0; });
  job_ = nullptr;
  std::exception_ptr e = std::exchange(error_, nullptr);
  l.unlock();
  if (e) std::rethrow_exception(e);
}

void ThreadPool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || (generation_ != seen && job_ && next_ < chunks_); });
    if (stop_) return;
    while (job_ && next_ < chunks_) {
      int c = next_++;
      const auto* job = job_;
      l.unlock();
      call(*job, c);
      l.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
    seen = generation_;
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
