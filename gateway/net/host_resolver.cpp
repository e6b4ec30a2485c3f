// The bounded DNS resolver (see host_resolver.h). Workers are detached and share the state
// with the resolver, so a worker stuck in getaddrinfo never holds up shutdown; what a lookup
// reports back (a post to its caller's strand) is dropped once the resolver is shut down, so a
// late answer never reaches an io_context that is gone.
#include "gateway/net/host_resolver.h"

#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "shared/error.h"

namespace m3::net {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct HostResolver::Job {
  std::string host;
  uint16_t port = 0;
  Clock::time_point deadline;
  // Reports the answer to the waiting coroutine; emptied (under State::mu) when the caller
  // gave up or the resolver shut down, so it runs at most once and never after shutdown.
  std::function<void(std::exception_ptr, Endpoints)> deliver;
};

struct HostResolver::State {
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable exit_cv;
  std::deque<std::shared_ptr<Job>> queue;
  std::vector<std::shared_ptr<Job>> running;
  size_t queue_limit = 0;
  int live = 0;  // workers not yet exited
  int busy = 0;  // workers inside a lookup
  bool stopping = false;
  LookupFn lookup;
};

namespace {

// What the awaiting coroutine and the worker share. `timer` belongs to the coroutine and is
// touched only on its strand (by the coroutine and by the posted wakeup).
struct Wait {
  std::mutex mu;
  bool done = false;
  std::exception_ptr error;
  HostResolver::Endpoints endpoints;
  asio::steady_timer* timer = nullptr;
};

}  // namespace

HostResolver::HostResolver(Options options)
    : threads_(std::max(options.threads, 1)), state_(std::make_shared<State>()) {
  state_->queue_limit = static_cast<size_t>(std::max(options.queue_limit, 0));
  state_->lookup = options.lookup ? std::move(options.lookup) : LookupFn(&SystemLookup);
  state_->live = threads_;
  for (int i = 0; i < threads_; ++i) {
    std::thread([state = state_] {
      pthread_setname_np(pthread_self(), "m3-dns");
      Loop(state);
    }).detach();
  }
}

HostResolver::~HostResolver() {
  Shutdown();
}

void HostResolver::Shutdown() {
  std::vector<std::function<void(std::exception_ptr, Endpoints)>> dropped;
  {
    std::unique_lock lock(state_->mu);
    state_->stopping = true;
    for (auto& job : state_->queue) dropped.push_back(std::move(job->deliver));
    state_->queue.clear();
    for (auto& job : state_->running) dropped.push_back(std::move(job->deliver));
    state_->work_cv.notify_all();
    // Idle workers exit at once; those inside getaddrinfo are left to finish on their own.
    state_->exit_cv.wait(lock, [&] { return state_->live == state_->busy; });
  }
}

void HostResolver::Loop(const std::shared_ptr<State>& state) {
  std::unique_lock lock(state->mu);
  for (;;) {
    state->work_cv.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
    if (state->stopping) break;
    std::shared_ptr<Job> job = std::move(state->queue.front());
    state->queue.pop_front();
    // Its caller has stopped waiting: do not spend a worker on it.
    if (!job->deliver || Clock::now() >= job->deadline) {
      job->deliver = nullptr;
      continue;
    }
    state->running.push_back(job);
    ++state->busy;
    lock.unlock();
    Endpoints endpoints;
    std::exception_ptr error;
    try {
      endpoints = state->lookup(job->host, job->port);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --state->busy;
    std::erase(state->running, job);
    // Under the lock, so that Shutdown cannot return while an answer is being posted.
    if (job->deliver && !state->stopping) {
      auto deliver = std::move(job->deliver);
      job->deliver = nullptr;
      deliver(error, std::move(endpoints));
    }
    if (state->stopping) break;
  }
  --state->live;
  state->exit_cv.notify_all();
}

HostResolver::Endpoints HostResolver::SystemLookup(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int status = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  Endpoints endpoints;
  for (addrinfo* ai = result; status == 0 && ai != nullptr; ai = ai->ai_next) {
    boost::asio::ip::tcp::endpoint ep;
    if (ai->ai_addrlen > ep.capacity()) continue;
    std::memcpy(ep.data(), ai->ai_addr, ai->ai_addrlen);
    ep.resize(ai->ai_addrlen);
    ep.port(port);
    endpoints.push_back(ep);
  }
  if (result != nullptr) ::freeaddrinfo(result);
  if (status != 0 || endpoints.empty()) {
    throw Error(ErrorCode::kUnavailable,
                "cannot resolve host '" + host +
                    "': " + (status != 0 ? ::gai_strerror(status) : "no addresses"));
  }
  return endpoints;
}

asio::awaitable<HostResolver::Endpoints> HostResolver::Resolve(std::string host, uint16_t port,
                                                               Clock::time_point deadline) {
  auto executor = co_await asio::this_coro::executor;
  auto wait = std::make_shared<Wait>();
  asio::steady_timer timer(executor, deadline);
  wait->timer = &timer;
  struct Unhook {
    Wait& wait;
    ~Unhook() { wait.timer = nullptr; }
  } unhook{*wait};

  auto job = std::make_shared<Job>();
  job->host = host;
  job->port = port;
  job->deadline = deadline;
  job->deliver = [wait, executor](std::exception_ptr error, Endpoints endpoints) {
    {
      std::lock_guard lock(wait->mu);
      wait->done = true;
      wait->error = error;
      wait->endpoints = std::move(endpoints);
    }
    asio::post(executor, [wait] {
      if (wait->timer) wait->timer->cancel();
    });
  };
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopping) {
      throw Error(ErrorCode::kUnavailable, "cannot resolve host '" + host + "': shutting down");
    }
    // Lookups that idle workers are about to take do not wait; only the rest count.
    const int64_t idle = state_->live - state_->busy;
    const int64_t waiting_after = static_cast<int64_t>(state_->queue.size()) + 1 - idle;
    if (waiting_after > static_cast<int64_t>(state_->queue_limit)) {
      throw Error(ErrorCode::kResourceExhausted,
                  "cannot resolve host '" + host +
                      "' now: " + std::to_string(state_->queue.size()) +
                      " DNS lookups are already waiting; retry later");
    }
    state_->queue.push_back(job);
  }
  state_->work_cv.notify_one();

  for (;;) {
    {
      std::lock_guard lock(wait->mu);
      if (wait->done) break;
    }
    if (Clock::now() >= deadline) {
      std::lock_guard lock(state_->mu);
      job->deliver = nullptr;          // a late answer has no one to go to
      std::erase(state_->queue, job);  // and a lookup not started yet no longer takes room
      throw Error(ErrorCode::kDeadlineExceeded, "timed out resolving host '" + host + "'");
    }
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  std::lock_guard lock(wait->mu);
  if (wait->error) std::rethrow_exception(wait->error);
  co_return std::move(wait->endpoints);
}

}  // namespace m3::net
