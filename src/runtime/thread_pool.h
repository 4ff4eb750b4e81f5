// The runtime's thread pool: splits a kernel's outermost loop over KILN_THREADS workers.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

// KILN_THREADS, given its text (null when unset): unset or empty means all hardware threads;
// otherwise a whole number from 1 to max_threads() (ir/settings.h), or the settings table's
// kiln::Error naming the variable, the value and the allowed range.
int threads_setting(const char* text);
// Settings::threads (KILN_THREADS) where set (> 0, checked the same way), else all hardware threads.
int num_threads();
// Threads the pool really has (num_threads() when it was created): parallel_for runs at most this
// many chunks at once.
int pool_threads();
// Runs fn(start, end) over [0, n) in up to num_threads() contiguous chunks; returns when all finish.
// Calls from several threads take turns; fn must not call parallel_for. An exception from fn, on
// any thread, is thrown here as a kiln::Error once every chunk finished.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// A fixed set of worker threads; parallel_for uses one of num_threads() for the whole process.
class ThreadPool {
 public:
  // Starts n - 1 workers (the thread calling run() is the n-th). When the system refuses one, the
  // workers already started are stopped and joined, and a kiln::Error names KILN_THREADS.
  explicit ThreadPool(int n);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs job(0), ..., job(chunks - 1) (chunks < 65536), chunk 0 on the calling thread; returns when
  // all finished.
  // The first exception any chunk threw is rethrown here, as it was, after all finished.
  void run(int chunks, const std::function<void(int)>& job);

 private:
  void work();
  void call(const std::function<void(int)>& job, int chunk);
  void stop();
  // Claims the next chunk of job `generation`, or -1 when it has none left (or a newer job began).
  int claim(uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_;
  // the current job, set before next_ publishes it; workers read it without a lock: they call it
  // only with a chunk claim() gave them, which a job gives out only while it runs
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  // (job generation << 32) | (its chunks << 16) | next chunk: a worker claims chunks of the job it
  // saw begin, never of a later one
  std::atomic<uint64_t> next_{0};
  std::atomic<int> pending_{0};   // chunks not finished
  std::atomic<int> sleepers_{0};  // workers waiting on cv_
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace kiln::runtime
