// Bounded worker pool (see worker_pool.h).
#include "gateway/net/worker_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <exception>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::net {

WorkerPool::WorkerPool(int workers, int queue_limit, int nice)
    : queue_limit_(static_cast<size_t>(queue_limit < 0 ? 0 : queue_limit)) {
  Require(workers >= 1, ErrorCode::kInvalidArgument, "the worker pool needs at least 1 worker");
  for (int i = 0; i < workers; ++i) {
    threads_.emplace_back([this, nice] {
      if (nice != 0) {
        // On Linux a thread's niceness is its own (setpriority on its thread id); raising it
        // needs no privilege. A failure leaves the default priority, which only costs latency.
        const int base = ::getpriority(PRIO_PROCESS, 0);
        (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), base + nice);
      }
      Loop();
    });
  }
}

WorkerPool::~WorkerPool() {
  Shutdown();
}

bool WorkerPool::FullLocked() const {
  if (stopping_) return true;
  // Jobs that idle workers are about to take do not wait; only the rest count against the
  // limit (a queued job may not have been picked up yet even though a worker is free).
  int64_t free_workers = static_cast<int64_t>(threads_.size()) - running_;
  int64_t waiting_after = static_cast<int64_t>(queue_.size()) + slots_ + 1 - free_workers;
  return waiting_after > static_cast<int64_t>(queue_limit_);
}

bool WorkerPool::full() const {
  std::lock_guard lock(mu_);
  return FullLocked();
}

bool WorkerPool::TrySubmit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (FullLocked()) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

bool WorkerPool::TryReserveSlot() {
  std::lock_guard lock(mu_);
  if (FullLocked()) return false;
  ++slots_;
  return true;
}

void WorkerPool::ReleaseSlot() {
  std::lock_guard lock(mu_);
  if (slots_ > 0) --slots_;
}

bool WorkerPool::Submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  }
  std::lock_guard lock(mu_);
  threads_.clear();
}

int64_t WorkerPool::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t WorkerPool::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

void WorkerPool::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    try {
      job();
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "worker job failed: ", e.what());
    } catch (...) {
      Log(LogLevel::kError, "worker job failed with an unknown exception");
    }
    std::lock_guard lock(mu_);
    --running_;
  }
}

}  // namespace m3::net
