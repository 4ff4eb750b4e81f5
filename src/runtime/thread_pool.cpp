// A fixed pool of worker threads; parallel_for hands out one chunk per worker.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/debug.h"

namespace kiln::runtime {

namespace {

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n - 1; i++) workers_.emplace_back([this, i] { work(i + 1); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int chunks, const std::function<void(int)>& job) {
    std::lock_guard<std::mutex> one_job(run_mu_);  // callers on other threads wait their turn
    std::unique_lock<std::mutex> l(mu_);
    job_ = &job;
    chunks_ = chunks;
    next_ = 1;  // the calling thread takes chunk 0
    pending_ = chunks - 1;
    generation_++;
    l.unlock();
    cv_.notify_all();
    job(0);
    while (true) {  // help with remaining chunks, then wait for the rest
      l.lock();
      if (next_ >= chunks_) break;
      int c = next_++;
      l.unlock();
      job(c);
      l.lock();
      pending_--;
      l.unlock();
    }
    done_cv_.wait(l, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void work(int) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || (generation_ != seen && job_ && next_ < chunks_); });
      if (stop_) return;
      while (job_ && next_ < chunks_) {
        int c = next_++;
        const auto* job = job_;
        l.unlock();
        (*job)(c);
        l.lock();
        if (--pending_ == 0) done_cv_.notify_all();
      }
      seen = generation_;
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool* p = new Pool(num_threads());  // never joined at exit: kernels may run from static dtors
  return *p;
}

}  // namespace

int num_threads() {
  int t = settings().threads;
  if (t <= 0) t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return t;
}

int pool_threads() { return pool().size(); }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  int chunks = static_cast<int>(std::min<int64_t>(n, pool().size()));
  if (chunks <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::function<void(int)> job = [&](int c) {
    int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
    if (lo < hi) fn(lo, hi);
  };
  pool().run(chunks, job);
}

}  // namespace kiln::runtime
