// The shared fetch io_context and its threads (see fetch_context.h). The threads share
// ownership of the io_context, so that when the context is released from one of them the
// io_context outlives that thread's run().
#include "gateway/net/fetch_context.h"

#include <pthread.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>

namespace m3::net {

struct FetchContext::Impl {
  explicit Impl(const Options& options)
      : threads(std::max(options.threads, 1)),
        max_inflight(std::max(options.max_inflight, 1)),
        resolver(options.resolver) {}

  const int threads;
  const int max_inflight;
  std::atomic<int> inflight{0};  // before io: fetches' frames may go with the io_context
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  HostResolver resolver;
  std::vector<std::thread> runners;
};

FetchContext::Options FetchContext::FromFetchOptions(const FetchOptions& options) {
  Options out;
  out.threads = options.network_threads;
  out.max_inflight = options.max_inflight_fetches;
  out.resolver.threads = options.resolver_threads;
  out.resolver.queue_limit = options.resolver_queue_limit;
  return out;
}

FetchContext::FetchContext(Options options) : impl_(std::make_shared<Impl>(options)) {
  impl_->work.emplace(impl_->io.get_executor());
  for (int i = 0; i < impl_->threads; ++i) {
    impl_->runners.emplace_back([impl = impl_] {
      pthread_setname_np(pthread_self(), "m3-fetch");
      impl->io.run();
    });
  }
}

FetchContext::~FetchContext() {
  // No lookup answers after this, so none is posted to an io_context that is going away.
  impl_->resolver.Shutdown();
  impl_->work.reset();
  impl_->io.stop();
  for (auto& t : impl_->runners) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
}

boost::asio::io_context& FetchContext::io() {
  return impl_->io;
}

HostResolver& FetchContext::resolver() {
  return impl_->resolver;
}

int FetchContext::threads() const {
  return impl_->threads;
}

int FetchContext::max_inflight() const {
  return impl_->max_inflight;
}

std::atomic<int>& FetchContext::inflight() {
  return impl_->inflight;
}

}  // namespace m3::net
