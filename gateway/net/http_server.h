// An HTTP/1.1 server on Boost.Asio/Beast: one listener, one session per connection, a few
// network threads. Requests are framed by HttpRequestParser (RFC 9112, bounded everywhere);
// a refused request is answered with an OpenAI-style error and its connection closed. The
// server caps connections (over the cap a client gets 503 at once), backs off when the process
// runs out of descriptors, and charges request bodies to a shared MemoryBudget as they arrive
// (429 when it is spent). A header check runs before any body byte is read, so requests that
// will be refused (unknown route, full queue) never cost a body. Handlers must return quickly;
// they answer through an HttpExchange (http_exchange.h), which may be used later from any
// thread (e.g. a worker pool or gRPC threads), so slow work never blocks the network threads.
// An answer is one whole response or a stream (chunked transfer encoding, e.g. server-sent
// events) whose writes queue up to a bound per connection; a client too slow for that bound is
// disconnected. While a handler works the session keeps reading, so a client that leaves is
// noticed at once (OnDisconnect) and bytes it pipelines are kept for its next request. The
// older Responder handlers (one whole response) run through an adapter over the exchange.
// HEAD is answered here, for every handler: the handler answers as for GET and the client gets
// that response's head (Content-Length included) without its body; a stream ends at its head.
// Sessions own what they touch (the io_context included), so an exchange or Responder used or
// released after the server is stopped or destroyed is a harmless no-op.
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

#include "gateway/net/http_exchange.h"
#include "gateway/net/http_request_parser.h"
#include "gateway/net/memory_budget.h"

namespace m3::net {

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
  // Told of each request the server refuses itself for want of body memory (429), which never
  // reaches the handler, so the refusals can be counted with the handler's own answers.
  std::function<void(const HttpRequest& header, int status)> on_refusal;
  // At the end of Stop's grace period, the answer for each request whose handler has neither
  // answered nor started a stream (e.g. a prompt still being rendered or tokenized), by its
  // request target; unset: such connections are closed without an answer.
  std::function<HttpResponse(const std::string& target)> deadline_response;
  // After a request whose body reserved at least this much is answered, freed heap pages go
  // back to the system (malloc_trim): a large body's parse leaves hundreds of MB resident
  // otherwise. 0: never.
  uint64_t trim_after_body_bytes = 8ull << 20;
  std::chrono::milliseconds read_timeout{30000};   // one whole request, header and body
  std::chrono::milliseconds idle_timeout{60000};   // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{60000};  // each write (a whole response, a chunk batch)
  // Bytes of a stream queued but not yet written to the socket; a Write that would pass it
  // closes the connection (the client is not reading fast enough) and returns false.
  uint64_t stream_queue_bytes = 4ull << 20;
  // Bytes a client may pipeline while its previous request is being answered; beyond this
  // the session stops reading until the answer is done (and notices a disconnect only then).
  uint64_t pipeline_bytes = 64ull << 10;
};

// A JSON response with the given status (Content-Type application/json).
HttpResponse JsonResponse(int status, const std::string& body);

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, ExchangeHandler handler, HttpHeaderCheck header_check = {});
  // A handler answering with one whole response through a Responder (adapted to an exchange).
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeaderCheck header_check = {});
  ~HttpServer();  // Stop({})

  // Binds and starts the network threads; throws kUnavailable when the address is taken.
  void Start();
  uint16_t port() const { return port_; }
  // Stops accepting connections; running requests continue.
  void StopAccepting();
  // Waits up to `grace` for requests in flight (streams included) to be answered to the end,
  // then closes every connection (running handlers see a disconnect) and stops the threads.
  // Exchanges used after this are no-ops. `at_deadline` (optional) runs when the grace period
  // ends with requests still in flight: it ends them with what their clients are to read last
  // (a stream's error event and end); then requests with no response begun get
  // options.deadline_response. Both are given up to a second to be written before the
  // connections close.
  void Stop(std::chrono::milliseconds grace, const std::function<void()>& at_deadline = {});
  // Requests dispatched whose response has not been fully written.
  int64_t in_flight() const;
  int64_t connections() const;

  // What sessions share with the server and keep alive after it is gone (defined in the .cpp).
  struct Core;

 private:
  void Accept();
  void OnAcceptError(const boost::system::error_code& ec);

  std::shared_ptr<Core> core_;  // first: the acceptor below runs on its io_context
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_backoff_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point last_accept_log_{};
  int64_t accept_errors_unlogged_ = 0;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace m3::net
