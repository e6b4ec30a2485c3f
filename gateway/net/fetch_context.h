// FetchContext: where every http(s) media fetch of the process runs: one io_context driven by
// a small fixed set of network threads, on which each fetch is a coroutine (so a thousand
// slow origins cost sockets and coroutine frames, not threads), the bounded DNS resolver, and
// a cap on fetches in flight (past it a fetch is refused with kResourceExhausted rather than
// queued, the process's rule for overload). One per process: MediaFetcher makes its own when
// given none, and the serving process makes exactly one MediaFetcher.
#pragma once

#include <atomic>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "gateway/net/fetch_options.h"
#include "gateway/net/host_resolver.h"

namespace m3::net {

class FetchContext {
 public:
  struct Options {
    int threads = 2;
    int max_inflight = 256;
    HostResolver::Options resolver;
  };
  // The thread counts and caps of `options` (FetchOptions::network_threads and friends).
  static Options FromFetchOptions(const FetchOptions& options);

  explicit FetchContext(Options options);
  // Drops pending fetches (their completions are never called; callers keep the context alive
  // while they wait) and stops the threads. Safe to run on one of the context's own threads
  // (the last owner may be a fetch's completion): that thread is detached and ends once its
  // current handler returns.
  ~FetchContext();
  FetchContext(const FetchContext&) = delete;
  FetchContext& operator=(const FetchContext&) = delete;

  boost::asio::io_context& io();
  HostResolver& resolver();
  int threads() const;
  int max_inflight() const;
  // The count of fetches in flight, for the cap.
  std::atomic<int>& inflight();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace m3::net
