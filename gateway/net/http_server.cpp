// Beast HTTP/1.1 server: listener and per-connection sessions (see http_server.h).
#include "gateway/net/http_server.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <mutex>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include "gateway/net/api_error.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpResponse ErrorResponse(int status, const std::string& message, std::string_view code) {
  return JsonResponse(status, OpenAiErrorBody(status, message, std::nullopt, code).dump());
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler,
          const HttpHeaderCheck& header_check, std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)),
        options_(options),
        handler_(handler),
        header_check_(header_check),
        shared_(std::move(shared)) {
    shared_->connections.fetch_add(1);
  }
  ~Session() { shared_->connections.fetch_sub(1); }

  void Run() {
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(&Session::StartRequest, shared_from_this()));
  }

  // Over the connection cap: answer 503 without reading anything, then close.
  void Refuse(int64_t cap) {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), cap] {
      self->keep_alive_ = false;
      self->request_error_ = true;
      HttpResponse res = ErrorResponse(
          503, "the server is at its limit of " + std::to_string(cap) + " connections; retry later",
          "server_busy");
      res.set(http::field::retry_after, "1");
      self->Write(std::move(res));
    });
  }

 private:
  void StartRequest() {
    HttpParserLimits limits = options_.parser;
    limits.max_body_bytes = options_.max_body_bytes;
    parser_.emplace(limits);
    header_checked_ = false;
    body_reservation_ = options_.memory ? options_.memory->Open() : MemoryBudget::Reservation();
    // The first request gets the read timeout; between keep-alive requests the idle one.
    stream_.expires_after(first_ ? options_.read_timeout : options_.idle_timeout);
    first_ = false;
    Process();
  }

  // Feeds buffered bytes to the parser and acts on what it found; reads more when it needs to.
  void Process() {
    for (;;) {
      const size_t used = parser_->Feed(pending_);
      pending_.erase(0, used);
      if (parser_->failed()) {
        return RefuseRequest(parser_->error_status(), parser_->error_message(),
                             parser_->error_status() == 413   ? "payload_too_large"
                             : parser_->error_status() == 431 ? "header_fields_too_large"
                                                              : "invalid_request");
      }
      if (parser_->header_done() && !header_checked_) {
        header_checked_ = true;
        stream_.expires_after(options_.read_timeout);
        if (header_check_) {
          std::optional<HttpResponse> refusal;
          try {
            refusal = header_check_(parser_->header());
          } catch (const std::exception& e) {
            Log(LogLevel::kError, "http header check threw: ", e.what());
            refusal = ErrorResponse(500, "internal error", "internal_error");
          }
          if (refusal) return RefuseWith(std::move(*refusal));
        }
        if (!Charge(parser_->chunked() ? 0 : parser_->content_length())) return;
        const bool body_follows = parser_->chunked() || parser_->content_length() > 0;
        // RFC 9110 15.2.1: no 1xx answers to an HTTP/1.0 client.
        if (parser_->expects_continue() && body_follows && pending_.empty() &&
            parser_->header().version() == 11) {
          return SendContinue();
        }
        continue;
      }
      if (parser_->chunked() && !Charge(parser_->body_bytes())) return;
      if (parser_->done()) return Dispatch();
      if (!pending_.empty() && used > 0) continue;
      return ReadMore();
    }
  }

  // Makes the body reservation cover `bytes`; answers 429 and returns false when it cannot.
  bool Charge(uint64_t bytes) {
    if (!options_.memory) return true;
    const int64_t want = static_cast<int64_t>(bytes) * std::max(options_.body_charge_factor, 1) -
                         body_reservation_.bytes();
    if (want <= 0) return true;
    // Chunked bodies reserve ahead in steps, so the budget is not touched for every chunk.
    const int64_t step = parser_->chunked() ? std::max<int64_t>(want, 1 << 20) : want;
    if (body_reservation_.TryGrow(step) || body_reservation_.TryGrow(want)) return true;
    HttpResponse res = ErrorResponse(
        429,
        "the server is busy: request bodies in flight would exceed its memory budget of " +
            std::to_string(options_.memory->limit()) + " bytes; retry later",
        "server_busy");
    res.set(http::field::retry_after, "1");
    RefuseWith(std::move(res));
    return false;
  }

  void ReadMore() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnReadError(ec);
                              self->pending_.append(self->scratch_.data(), n);
                              self->Process();
                            });
  }

  void SendContinue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->Process();
                      });
  }

  void OnReadError(beast::error_code ec) {
    // A connection that ends mid-request, times out or resets gets no answer: there is no one
    // left to read it (a timed-out slow client is simply dropped).
    (void)ec;
    Close();
  }

  void RefuseRequest(int status, const std::string& message, std::string_view code) {
    RefuseWith(ErrorResponse(status, message, code));
  }

  // Answers without dispatching; the request's framing (or its unread body) means the
  // connection cannot carry another request.
  void RefuseWith(HttpResponse response) {
    keep_alive_ = false;
    request_error_ = true;
    version_ = parser_ && parser_->header_done() ? parser_->header().version() : 11;
    Write(std::move(response));
  }

  void Dispatch() {
    HttpRequest request = parser_->Release();
    keep_alive_ = request.keep_alive();
    version_ = request.version();
    stream_.expires_never();  // no timeout while the handler works; the write sets its own
    shared_->in_flight.fetch_add(1);
    auto once = std::make_shared<std::once_flag>();
    auto self = shared_from_this();
    Responder respond = [self, once](HttpResponse response) {
      std::call_once(*once, [&] {
        asio::post(self->stream_.get_executor(), [self, r = std::move(response)]() mutable {
          self->shared_->in_flight.fetch_sub(1);
          self->Write(std::move(r));
        });
      });
    };
    try {
      handler_(std::move(request), respond);
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "http handler threw: ", e.what());
      respond(ErrorResponse(500, "internal error", "internal_error"));
    }
  }

  void Write(HttpResponse response) {
    response.version(version_);
    response.keep_alive(keep_alive_);
    response.prepare_payload();
    response_ = std::make_shared<HttpResponse>(std::move(response));
    stream_.expires_after(options_.write_timeout);
    http::async_write(stream_, *response_,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }

  void OnWrite(beast::error_code ec, size_t) {
    response_.reset();
    body_reservation_.Reset();
    if (ec) return Close();
    if (!keep_alive_) return request_error_ ? LingerClose() : Close();
    StartRequest();
  }

  // After refusing a request mid-body (e.g. 413), the client may still be sending. Closing at
  // once would make the kernel answer its data with a reset that can destroy our response
  // before the client reads it, so stop sending, then read and discard for a bounded time.
  void LingerClose() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    Discard();
  }

  void Discard() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->discarded_ += n;
                              if (ec || self->discarded_ > (64u << 20)) return self->Close();
                              self->Discard();
                            });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  const HttpHeaderCheck& header_check_;
  std::shared_ptr<HttpServer::Shared> shared_;
  std::string pending_;  // received, not yet parsed (at most one read's worth)
  std::optional<HttpRequestParser> parser_;
  MemoryBudget::Reservation body_reservation_;
  std::shared_ptr<HttpResponse> response_;
  bool keep_alive_ = true;
  bool first_ = true;
  bool header_checked_ = false;
  bool request_error_ = false;
  size_t discarded_ = 0;
  std::array<char, 65536> scratch_{};
  unsigned version_ = 11;
};

}  // namespace

HttpResponse JsonResponse(int status, const std::string& body) {
  HttpResponse res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "m3serve");
  res.body() = body;
  return res;
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeaderCheck header_check)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      header_check_(std::move(header_check)),
      acceptor_(asio::make_strand(ioc_)),
      accept_backoff_(acceptor_.get_executor()) {}

HttpServer::~HttpServer() {
  Stop(std::chrono::milliseconds(0));
}

void HttpServer::Start() {
  beast::error_code ec;
  auto address = asio::ip::make_address(options_.host, ec);
  if (ec)
    throw Error(ErrorCode::kInvalidArgument, "invalid listen address '" + options_.host + "'");
  tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(ErrorCode::kUnavailable, "cannot listen on " + options_.host + ":" +
                                             std::to_string(options_.port) + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  int n = options_.threads < 1 ? 1 : options_.threads;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
}

void HttpServer::Accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) return OnAcceptError(ec);
    backoff_ = std::chrono::milliseconds(0);
    auto session =
        std::make_shared<Session>(std::move(socket), options_, handler_, header_check_, shared_);
    if (shared_->connections.load() > options_.max_connections) {
      session->Refuse(options_.max_connections);
    } else {
      session->Run();
    }
    Accept();
  });
}

// Out of descriptors (EMFILE/ENFILE) or kernel memory, accept fails at once until something
// closes; retrying at once would spin a core and flood the log. Wait, doubling up to a second,
// and log at most once a second with a count of what was not logged.
void HttpServer::OnAcceptError(const beast::error_code& ec) {
  const bool exhausted = ec == asio::error::no_descriptors || ec.value() == ENFILE ||
                         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_log_ >= std::chrono::seconds(1)) {
    Log(LogLevel::kWarn, "accept failed: ", ec.message(),
        accept_errors_unlogged_ > 0
            ? " (and " + std::to_string(accept_errors_unlogged_) + " more since the last report)"
            : std::string());
    last_accept_log_ = now;
    accept_errors_unlogged_ = 0;
  } else {
    ++accept_errors_unlogged_;
  }
  if (!exhausted) {
    backoff_ = std::chrono::milliseconds(0);
    return Accept();  // e.g. ECONNABORTED: the next connection is fine
  }
  backoff_ =
      std::clamp(backoff_ * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  accept_backoff_.expires_after(backoff_);
  accept_backoff_.async_wait([this](beast::error_code wait_ec) {
    if (wait_ec || !acceptor_.is_open()) return;
    Accept();
  });
}

void HttpServer::StopAccepting() {
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_backoff_.cancel();
  });
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  StopAccepting();
  auto until = std::chrono::steady_clock::now() + grace;
  while (shared_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Let just-posted responses reach the socket before the loop stops.
  if (grace.count() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ioc_.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace m3::net
