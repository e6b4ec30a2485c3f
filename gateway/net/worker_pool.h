// A fixed pool of worker threads with a bounded queue, for the CPU-heavy media work (fetch,
// decode, resize) that must never run on network threads. TrySubmit refuses at once when
// `queue_limit` jobs are already waiting, so callers can answer 429 / RESOURCE_EXHAUSTED
// instead of piling up latency.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace m3::net {

class WorkerPool {
 public:
  // `nice` (Linux): the workers' scheduling niceness relative to the rest of the process. The
  // media pool runs at a lower priority than the network threads, so that answering requests
  // that need no media work (refusals, health checks) is never starved by decoding.
  WorkerPool(int workers, int queue_limit, int nice = 0);
  ~WorkerPool();  // Shutdown()

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when the queue is full or the pool is shutting down. Jobs must not throw (an
  // escaping exception is logged and dropped so one bad job never takes a worker down).
  bool TrySubmit(std::function<void()> job);
  // A place in the queue for work that will come in pieces later (a request whose media are
  // still being fetched): it counts as one waiting job until ReleaseSlot, so admission stays
  // bounded by the queue limit without holding a thread. False when the queue is full.
  bool TryReserveSlot();
  void ReleaseSlot();
  // Queues past the limit (false only when shutting down): the pieces of work that holds a
  // slot (the media items of an admitted request, bounded by the request's item limit).
  bool Submit(std::function<void()> job);
  // Stops accepting, finishes queued and running jobs, joins the threads. Idempotent.
  void Shutdown();

  // Whether TrySubmit would refuse a job now (a hint: it may change at once).
  bool full() const;
  int64_t queued() const;
  int64_t running() const;

 private:
  void Loop();
  bool FullLocked() const;

  const size_t queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int64_t running_ = 0;
  int64_t slots_ = 0;  // reserved by TryReserveSlot
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace m3::net
