// RankThreads: one persistent thread per rank of a parallel model. Every call a rank's backend
// sees runs on that rank's thread (a GPU backend's current device and stream stay put), and Run
// hands all ranks the same job and returns when each has finished it (lock step).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace m3::engine::parallel {

class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Runs job(rank) on every rank's thread; rethrows the lowest rank's exception, if any.
  void Run(const std::function<void(int)>& job);

 private:
  void Loop(int rank);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace m3::engine::parallel
