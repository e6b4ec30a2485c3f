// HostResolver: DNS lookups for the media fetcher on a fixed pool of threads with a bounded
// queue. getaddrinfo blocks and cannot be cancelled, so it cannot run on the network threads;
// a thread per lookup (what this replaces) lets a stalled DNS server turn every request into
// one more stuck thread. Here a lookup waits in the queue for one of `threads` workers, and its
// caller stops waiting at its deadline (kDeadlineExceeded) whether the lookup has started or
// not; a lookup whose deadline passed before a worker took it is dropped without running.
// The tradeoff: a getaddrinfo that stalls still holds its worker until the system resolver
// gives up (resolv.conf timeout x attempts), so a DNS outage can occupy every worker; lookups
// behind them then fail at their deadline, or at once with kResourceExhausted when the queue
// is full, instead of costing threads. Threads are bounded; a slow resolver costs throughput.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace m3::net {

class HostResolver {
 public:
  using Endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  // Resolves on the calling (pool) thread; throws m3::Error (kUnavailable when the name does
  // not resolve). Tests inject their own to stall or answer without a DNS server.
  using LookupFn = std::function<Endpoints(const std::string& host, uint16_t port)>;

  struct Options {
    int threads = 4;
    int queue_limit = 64;  // lookups waiting for a worker; more are refused at once
    LookupFn lookup;       // empty: SystemLookup
  };

  explicit HostResolver(Options options);
  // Stops taking lookups and drops queued ones (their callers never hear back, so the
  // resolver must outlive the io_context its callers run on, or be shut down before it).
  // Idle workers exit now; a worker inside a lookup exits when the lookup returns.
  ~HostResolver();
  HostResolver(const HostResolver&) = delete;
  HostResolver& operator=(const HostResolver&) = delete;

  // All TCP addresses of `host`, port set to `port`. Must be awaited on a strand (the wakeup
  // is posted to the awaiting coroutine's executor). Throws kUnavailable (no such name),
  // kDeadlineExceeded (not done by `deadline`), kResourceExhausted (queue full).
  boost::asio::awaitable<Endpoints> Resolve(std::string host, uint16_t port,
                                            std::chrono::steady_clock::time_point deadline);

  // See Options::threads; the workers are started by the constructor.
  int threads() const { return threads_; }
  // Stops as the destructor does; idempotent.
  void Shutdown();

  // getaddrinfo (AF_UNSPEC, SOCK_STREAM).
  static Endpoints SystemLookup(const std::string& host, uint16_t port);

 private:
  struct State;
  struct Job;
  static void Loop(const std::shared_ptr<State>& state);

  int threads_;
  std::shared_ptr<State> state_;
};

}  // namespace m3::net
