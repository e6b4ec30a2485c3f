// Beast HTTP/1.1 server: listener and per-connection sessions (see http_server.h).
#include "gateway/net/http_server.h"

#include <array>
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
          std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)),
        options_(options),
        handler_(handler),
        shared_(std::move(shared)) {}

  void Run() {
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    // The first request gets the read timeout; between keep-alive requests the idle one.
    stream_.expires_after(first_ ? options_.read_timeout : options_.idle_timeout);
    first_ = false;
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    stream_.expires_after(options_.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof ||
        ec == asio::error::operation_aborted) {
      return Close();
    }
    keep_alive_ = false;
    request_error_ = true;
    if (ec == http::error::body_limit) {
      return Write(ErrorResponse(
          413,
          "request body is over the limit of " + std::to_string(options_.max_body_bytes) + " bytes",
          "payload_too_large"));
    }
    if (ec == http::error::header_limit) {
      return Write(ErrorResponse(431, "request header fields too large", "invalid_request"));
    }
    Write(ErrorResponse(400, "malformed HTTP request: " + ec.message(), "invalid_request"));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    HttpRequest request = parser_->release();
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
    if (ec) return Close();
    if (!keep_alive_) return request_error_ ? LingerClose() : Close();
    Read();
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
  std::shared_ptr<HttpServer::Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpResponse> response_;
  bool keep_alive_ = true;
  bool first_ = true;
  bool request_error_ = false;
  size_t discarded_ = 0;
  std::array<char, 16384> scratch_{};
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

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      acceptor_(asio::make_strand(ioc_)) {}

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
    if (!ec) {
      std::make_shared<Session>(std::move(socket), options_, handler_, shared_)->Run();
    } else if (ec == asio::error::no_descriptors) {
      Log(LogLevel::kWarn, "accept failed: ", ec.message());
    }
    Accept();
  });
}

void HttpServer::StopAccepting() {
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
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
