// RankThreads: one persistent thread per rank of a parallel model. Every call a rank's backend
// sees runs on that rank's thread (a GPU backend's current device and stream stay put), and Run
// hands all ranks the same job and returns when each has finished it (lock step).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
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
  // Runs job(rank) on every rank's thread; rethrows the first exception thrown, if any.
  void Run(const std::function<void(int)>& job);
  // on_error: called on a rank's thread when its job throws, before the others finish; it
  // must make them stop waiting for that rank (abort the group's collectives). after_error:
  // called once every rank has left the failed job (reset the group for the next call).
  void SetOnError(std::function<void(int)> on_error, std::function<void()> after_error) {
    on_error_ = std::move(on_error);
    after_error_ = std::move(after_error);
  }
  // on_stuck: for groups whose collectives on_error cannot release (GPU ranks wait inside
  // device kernels for a peer that failed): called once, on Run's thread, when a rank has
  // failed and others are still in the job `grace` later (every layer has a collective, so a
  // rank still busy that long is waiting in one). It must release them (abort the group's
  // communicators); the group is then broken for good: Run refuses every later job.
  void SetOnStuck(std::function<void()> on_stuck, std::chrono::milliseconds grace) {
    on_stuck_ = std::move(on_stuck);
    stuck_grace_ = grace;
  }
  bool broken() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !broken_.empty();
  }

 private:
  void Loop(int rank);

  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr first_error_;
  std::function<void(int)> on_error_;
  std::function<void()> after_error_;
  std::function<void()> on_stuck_;
  std::chrono::milliseconds stuck_grace_{0};
  std::string broken_;  // why the group stopped for good; empty while it works
};

}  // namespace m3::engine::parallel
