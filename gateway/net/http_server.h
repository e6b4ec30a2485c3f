// An HTTP/1.1 server on Boost.Asio/Beast: one listener, one session per connection, a few
// network threads. Requests are framed by HttpRequestParser (RFC 9112, bounded everywhere);
// a refused request is answered with an OpenAI-style error and its connection closed. The
// server caps connections (over the cap a client gets 503 at once), backs off when the process
// runs out of descriptors, and charges request bodies to a shared MemoryBudget as they arrive
// (429 when it is spent). A header check runs before any body byte is read, so requests that
// will be refused (unknown route, full queue) never cost a body. Handlers must return quickly;
// they answer through a Responder, which may be called later from any thread (e.g. a worker
// pool), so slow work never blocks the network threads. Responses are whole messages today;
// a streaming Responder (SSE) fits beside this one without changing the framing code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

#include "gateway/net/http_request_parser.h"
#include "gateway/net/memory_budget.h"

namespace m3::net {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;
// Call exactly once; later calls are ignored. Thread-safe.
using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest&& request, Responder respond)>;
// Runs when a request's header section is complete and before its body is read (the request
// has no body yet). A response refuses the request; the connection is then closed.
using HttpHeaderCheck = std::function<std::optional<HttpResponse>(const HttpRequest& header)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port (see HttpServer::port())
  int threads = 2;
  uint64_t max_body_bytes = 64ull << 20;
  HttpParserLimits parser;     // its max_body_bytes is replaced by max_body_bytes
  int max_connections = 1024;  // open connections; more get 503 and are closed
  // Request bodies of all connections together; unset: no shared budget.
  std::shared_ptr<MemoryBudget> memory;
  // Bytes charged to `memory` per body byte: the body itself plus what the handler makes of
  // it while it works (a JSON parser holds about two more copies of a large string value).
  int body_charge_factor = 1;
  std::chrono::milliseconds read_timeout{30000};  // one whole request, header and body
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{60000};
};

// A JSON response with the given status (Content-Type application/json).
HttpResponse JsonResponse(int status, const std::string& body);

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeaderCheck header_check = {});
  ~HttpServer();  // Stop({})

  // Binds and starts the network threads; throws kUnavailable when the address is taken.
  void Start();
  uint16_t port() const { return port_; }
  // Stops accepting connections; running requests continue.
  void StopAccepting();
  // Waits up to `grace` for requests in flight to be answered, then closes everything.
  void Stop(std::chrono::milliseconds grace);
  int64_t in_flight() const { return shared_->in_flight.load(); }
  int64_t connections() const { return shared_->connections.load(); }

  struct Shared {
    std::atomic<int64_t> in_flight{0};
    std::atomic<int64_t> connections{0};
  };

 private:
  void Accept();
  void OnAcceptError(const boost::system::error_code& ec);

  HttpServerOptions options_;
  HttpHandler handler_;
  HttpHeaderCheck header_check_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_backoff_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point last_accept_log_{};
  int64_t accept_errors_unlogged_ = 0;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace m3::net
