// The thread pool behind ParallelFor: workers wait on a condition variable for a job, take
// chunks from an atomic counter, and the caller works too, then waits for the last chunk.
#include "kernels/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace m3::kernels::cpu {
namespace {

thread_local bool t_in_worker = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> run_lock(run_mu_);  // one job at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      chunk_ = chunk;
      next_.store(0);
      pending_ = (n + chunk - 1) / chunk;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    t_in_worker = true;
    Work();
    t_in_worker = false;
    std::unique_lock<std::mutex> lock(mu_);
    // Also wait for every worker to leave Work(), so none can take a chunk of the next job.
    done_cv_.wait(lock, [this] { return pending_ == 0 && active_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void Work() {
    for (;;) {
      int64_t begin = next_.fetch_add(chunk_);
      if (begin >= n_) return;
      int64_t end = std::min(n_, begin + chunk_);
      try {
        (*fn_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  void WorkerLoop() {
    t_in_worker = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (generation_ != seen && fn_ != nullptr); });
        if (stop_) return;
        seen = generation_;
        ++active_;
      }
      Work();
      std::lock_guard<std::mutex> lock(mu_);
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, pending_ = 0;
  int active_ = 0;  // workers inside Work()
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

int ConfiguredThreads() {
  if (const char* env = std::getenv("M3_NUM_THREADS")) {
    int v = std::atoi(env);
    if (v > 0) return std::min(v, 256);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& Pool() {
  static ThreadPool pool(ConfiguredThreads());
  return pool;
}

}  // namespace

int NumThreads() {
  return Pool().size();
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (t_in_worker || n <= grain || NumThreads() == 1) {
    fn(0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(NumThreads() * 4, (n + grain - 1) / grain);
  int64_t chunk = (n + chunks - 1) / chunks;
  Pool().Run(n, chunk, fn);
}

}  // namespace m3::kernels::cpu
