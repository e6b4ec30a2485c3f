// RankThreads: a generation counter wakes the rank threads; the caller waits for all.
#include "engine/parallel/rank_threads.h"

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::parallel {
namespace {

std::string Describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

RankThreads::RankThreads(int ranks) {
  for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { Loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void RankThreads::Run(const std::function<void(int)>& job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.empty()) throw Error(ErrorCode::kUnavailable, broken_);
  job_ = &job;
  pending_ = size();
  first_error_ = nullptr;
  ++generation_;
  start_cv_.notify_all();
  const auto done = [this] { return pending_ == 0; };
  while (!done()) {
    if (first_error_ && on_stuck_ && broken_.empty()) {
      if (done_cv_.wait_for(lock, stuck_grace_, done)) break;
      broken_ =
          "the parallel group stopped for good: a rank failed while the others waited for "
          "it in a collective (restart the engine); the failure: " +
          Describe(first_error_);
      Log(LogLevel::kError, broken_);
      lock.unlock();
      try {
        on_stuck_();
      } catch (...) {
      }
      lock.lock();
      continue;
    }
    done_cv_.wait(lock);
  }
  job_ = nullptr;
  if (first_error_) {
    // Every rank has left the job: nothing waits in a collective, so the group may be reset.
    if (after_error_) after_error_();
    std::rethrow_exception(first_error_);
  }
}

void RankThreads::Loop(int rank) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      {
        // The first failure is the cause; the others' are usually the abort it sets off.
        std::lock_guard<std::mutex> lock(mu_);
        if (!first_error_) first_error_ = error;
      }
      done_cv_.notify_all();  // Run starts its stuck timer
      if (on_error_) {
        try {
          on_error_(rank);
        } catch (...) {
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace m3::engine::parallel
