// Deadline-bounded DNS resolution (see host_resolver.h).
#include "gateway/net/host_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "shared/error.h"

namespace m3::net {
namespace {

struct Lookup {
  std::mutex mu;
  bool done = false;
  int status = 0;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
};

void RunLookup(const std::shared_ptr<Lookup>& lookup, const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int status = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
  for (addrinfo* ai = result; status == 0 && ai != nullptr; ai = ai->ai_next) {
    boost::asio::ip::tcp::endpoint ep;
    if (ai->ai_addrlen > ep.capacity()) continue;
    std::memcpy(ep.data(), ai->ai_addr, ai->ai_addrlen);
    ep.resize(ai->ai_addrlen);
    ep.port(port);
    endpoints.push_back(ep);
  }
  if (result != nullptr) ::freeaddrinfo(result);
  std::lock_guard lock(lookup->mu);
  lookup->status = status;
  lookup->endpoints = std::move(endpoints);
  lookup->done = true;
}

}  // namespace

boost::asio::awaitable<std::vector<boost::asio::ip::tcp::endpoint>> ResolveHost(
    std::string host, uint16_t port, std::chrono::steady_clock::time_point deadline) {
  auto lookup = std::make_shared<Lookup>();
  std::thread([lookup, host, port] { RunLookup(lookup, host, port); }).detach();
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (auto step = std::chrono::milliseconds(1);;
       step = std::min(step * 2, std::chrono::milliseconds(20))) {
    {
      std::lock_guard lock(lookup->mu);
      if (lookup->done) {
        if (lookup->status != 0 || lookup->endpoints.empty()) {
          throw Error(ErrorCode::kUnavailable,
                      "cannot resolve host '" + host + "': " +
                          (lookup->status != 0 ? ::gai_strerror(lookup->status) : "no addresses"));
        }
        co_return std::move(lookup->endpoints);
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(ErrorCode::kDeadlineExceeded, "timed out resolving host '" + host + "'");
    }
    timer.expires_after(step);
    co_await timer.async_wait(boost::asio::use_awaitable);
  }
}

}  // namespace m3::net
