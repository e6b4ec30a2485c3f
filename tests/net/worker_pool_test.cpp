// The bounded worker pool: queue limit, draining on shutdown, exceptions contained.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "gateway/net/worker_pool.h"

TEST_CASE("jobs beyond workers + queue limit are refused at once") {
  m3::net::WorkerPool pool(1, 1);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> done{0};
  auto blocker = [&] {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
    ++done;
  };
  CHECK(pool.TrySubmit(blocker));
  // Wait (bounded) until the worker picked it up so the next one really queues.
  for (int i = 0; i < 5000 && pool.running() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(pool.running() == 1);
  CHECK(pool.TrySubmit(blocker));
  CHECK(pool.queued() == 1);
  CHECK_FALSE(pool.TrySubmit(blocker));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  pool.Shutdown();
  CHECK(done == 2);
  CHECK_FALSE(pool.TrySubmit([] {}));
}

TEST_CASE("a throwing job does not take a worker down") {
  m3::net::WorkerPool pool(1, 4);
  std::atomic<int> ran{0};
  CHECK(pool.TrySubmit([] { throw std::runtime_error("boom"); }));
  CHECK(pool.TrySubmit([&] { ++ran; }));
  pool.Shutdown();
  CHECK(ran == 1);
}
