// DNS resolution with a deadline. getaddrinfo cannot be cancelled, and asio's resolver joins
// its thread when the io_context goes away, so a stalled DNS server could hold a fetch far past
// its timeout. Here each lookup runs on a detached thread that owns its state; the caller
// stops waiting at the deadline and the thread finishes (and cleans up) on its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace m3::net {

// All addresses of `host` (TCP). Throws kUnavailable when the name does not resolve and
// kDeadlineExceeded when the deadline passes first.
boost::asio::awaitable<std::vector<boost::asio::ip::tcp::endpoint>> ResolveHost(
    std::string host, uint16_t port, std::chrono::steady_clock::time_point deadline);

}  // namespace m3::net
