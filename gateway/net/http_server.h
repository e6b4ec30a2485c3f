// An HTTP/1.1 server on Boost.Beast: one listener, one session per connection (keep-alive,
// request body limit, read timeouts), a few network threads. Requests go to a handler that
// must return quickly; it answers through a Responder, which may be called later from any
// thread (e.g. a worker pool), so slow work never blocks the network threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

namespace m3::net {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;
// Call exactly once; later calls are ignored. Thread-safe.
using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest&& request, Responder respond)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port (see HttpServer::port())
  int threads = 2;
  uint64_t max_body_bytes = 256ull << 20;
  std::chrono::milliseconds read_timeout{30000};  // one whole request, header and body
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{60000};
};

// A JSON response with the given status (Content-Type application/json).
HttpResponse JsonResponse(int status, const std::string& body);

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // Stop({})

  // Binds and starts the network threads; throws kUnavailable when the address is taken.
  void Start();
  uint16_t port() const { return port_; }
  // Stops accepting connections; running requests continue.
  void StopAccepting();
  // Waits up to `grace` for requests in flight to be answered, then closes everything.
  void Stop(std::chrono::milliseconds grace);
  int64_t in_flight() const { return shared_->in_flight.load(); }

  struct Shared {
    std::atomic<int64_t> in_flight{0};
  };

 private:
  void Accept();

  HttpServerOptions options_;
  HttpHandler handler_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace m3::net
