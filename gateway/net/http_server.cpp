// Beast HTTP/1.1 server: listener, per-connection sessions, and the exchanges through which
// handlers answer, whole or streamed (see http_server.h).
#include "gateway/net/http_server.h"

#include <malloc.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
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
using Clock = std::chrono::steady_clock;

HttpResponse ErrorResponse(int status, const std::string& message, std::string_view code) {
  return JsonResponse(status, OpenAiErrorBody(status, message, std::nullopt, code).dump());
}

// The status line and header fields of a streamed response (its body follows separately).
std::string SerializeHead(const HttpResponse& head) {
  std::string out = head.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(head.result_int());
  out += ' ';
  const auto reason = head.reason();
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& field : head) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.append(name.data(), name.size());
    out += ": ";
    out.append(value.data(), value.size());
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string HexSize(size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[n & 15]);
    n >>= 4;
  } while (n > 0);
  return out;
}

class Session;

}  // namespace

// Everything a session touches besides its own members. Sessions hold it by shared_ptr, so a
// session kept alive by a handler's exchange after the server is gone still has its
// io_context (its socket and timers are registered there) and options.
struct HttpServer::Core {
  Core(HttpServerOptions o, ExchangeHandler h, HttpHeaderCheck c)
      : options(std::move(o)), handler(std::move(h)), header_check(std::move(c)) {}

  boost::asio::io_context ioc;  // first: destroyed last
  const HttpServerOptions options;
  const ExchangeHandler handler;
  const HttpHeaderCheck header_check;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> connections{0};

  std::mutex mu;         // guards the two below
  bool closing = false;  // Stop is closing every session; new ones are refused
  std::unordered_map<const Session*, std::weak_ptr<Session>> sessions;
};

namespace {

class Exchange;

// One connection. Network-side state is touched only on the session's strand; what handlers
// reach from other threads through their Exchange (the current request's phase, the stream's
// queue, the disconnect callback) is guarded by mu_. Each request gets a number, so an
// exchange kept after its response is done cannot touch the next request's response.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Core> core)
      : core_(std::move(core)),
        socket_(std::move(socket)),
        strand_(socket_.get_executor()),
        read_timer_(strand_),
        write_timer_(strand_) {
    // Every write is a whole response or a batch of stream chunks, so holding small segments
    // back to coalesce them (Nagle) only adds a delayed-ACK wait (~40 ms) to each SSE event.
    beast::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    core_->connections.fetch_add(1);
  }
  ~Session() {
    {
      std::lock_guard lock(core_->mu);
      core_->sessions.erase(this);
    }
    core_->connections.fetch_sub(1);
  }

  void Run() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->StartRequest(); });
  }

  // Over the connection cap: answer 503 without reading anything, then close.
  void Refuse(int64_t cap) {
    asio::dispatch(strand_, [self = shared_from_this(), cap] {
      HttpResponse res = ErrorResponse(
          503, "the server is at its limit of " + std::to_string(cap) + " connections; retry later",
          "server_busy");
      res.set(http::field::retry_after, "1");
      self->RefuseWith(std::move(res));
    });
  }

  // From any thread: closes the connection (a running handler sees a disconnect).
  void Close() {
    asio::post(strand_, [self = shared_from_this()] { self->Shutdown(); });
  }

  // The exchange's side, from any thread; `seq` names the request it belongs to.
  void Respond(uint64_t seq, HttpResponse response) {
    std::lock_guard lock(mu_);
    if (closed_ || seq != seq_ || phase_ != Phase::kWaiting) return;
    phase_ = Phase::kWhole;
    asio::post(strand_, [self = shared_from_this(), r = std::move(response)]() mutable {
      self->WriteWhole(std::move(r));
    });
  }

  void StartStream(uint64_t seq, HttpResponse head) {
    std::lock_guard lock(mu_);
    if (closed_ || seq != seq_ || phase_ != Phase::kWaiting) return;
    phase_ = Phase::kStreaming;
    head.version(req_version_);
    head.body().clear();
    if (req_version_ >= 11) {
      head.chunked(true);
      head.keep_alive(req_keep_alive_);
    } else {
      // HTTP/1.0 has no chunked coding: the body runs until the connection closes.
      head.erase(http::field::content_length);
      head.erase(http::field::transfer_encoding);
      head.keep_alive(false);
    }
    std::string bytes = SerializeHead(head);
    queued_bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
    // RFC 9110 9.3.2: a HEAD response is the GET response's head alone, so the stream ends at
    // its head; the handler's Writes then return false and it stops as for a client that left.
    if (req_head_) phase_ = Phase::kEnding;
    ScheduleFlushLocked();
  }

  bool Write(uint64_t seq, std::string data) {
    std::lock_guard lock(mu_);
    if (closed_ || seq != seq_ || phase_ != Phase::kStreaming) return false;
    if (data.empty()) return true;  // an empty chunk would end the body
    const bool chunked = req_version_ >= 11;
    std::string size_line = chunked ? HexSize(data.size()) + "\r\n" : std::string();
    const uint64_t bytes = size_line.size() + data.size() + (chunked ? 2 : 0);
    // One write may pass the bound on its own (into an empty queue), so a large event is not
    // refused from a client that keeps up; the queue never grows past bound + one write.
    if (queued_bytes_ > 0 && queued_bytes_ + bytes > core_->options.stream_queue_bytes) {
      Log(LogLevel::kWarn, "http stream: client is not reading (", queued_bytes_,
          " bytes queued, bound ", core_->options.stream_queue_bytes, "); closing its connection");
      closed_ = true;
      queue_.clear();
      queued_bytes_ = 0;
      asio::post(strand_, [self = shared_from_this()] { self->Shutdown(); });
      return false;
    }
    if (chunked) queue_.push_back(std::move(size_line));
    queue_.push_back(std::move(data));
    if (chunked) queue_.emplace_back("\r\n");
    queued_bytes_ += bytes;
    ScheduleFlushLocked();
    return true;
  }

  void EndStream(uint64_t seq) {
    std::lock_guard lock(mu_);
    if (closed_ || seq != seq_ || phase_ != Phase::kStreaming) return;
    phase_ = Phase::kEnding;
    if (req_version_ >= 11) {
      queue_.emplace_back("0\r\n\r\n");
      queued_bytes_ += 5;
    }
    ScheduleFlushLocked();
  }

  void OnDisconnect(uint64_t seq, std::function<void()> callback) {
    std::function<void()> previous;
    {
      std::lock_guard lock(mu_);
      if (seq != seq_) return;  // that response was sent in full
      if (!gone_early_) {
        if (phase_ != Phase::kDone) previous = std::exchange(on_disconnect_, std::move(callback));
        return;
      }
    }
    callback();
  }

  bool connected() const {
    std::lock_guard lock(mu_);
    return !closed_;
  }

  // From any thread, at the end of Stop's grace period: a request whose handler has neither
  // answered nor started a stream gets options.deadline_response (its connection then closes).
  // True when it did.
  bool AnswerAtDeadline() {
    const auto& make = core_->options.deadline_response;
    if (!make) return false;
    std::lock_guard lock(mu_);
    if (closed_ || phase_ != Phase::kWaiting) return false;
    phase_ = Phase::kWhole;
    asio::post(strand_, [self = shared_from_this(), r = make(req_target_)]() mutable {
      self->keep_alive_ = false;
      self->WriteWhole(std::move(r));
    });
    return true;
  }

  // The handler let go of the exchange. Without an answer the client gets a 500 (rather than
  // waiting forever); a stream that was never ended is cut off, so it cannot pass for complete.
  void Abandon(uint64_t seq) {
    std::lock_guard lock(mu_);
    if (closed_ || seq != seq_) return;
    if (phase_ == Phase::kWaiting) {
      Log(LogLevel::kError, "http handler released its exchange without answering");
      phase_ = Phase::kWhole;
      asio::post(strand_, [self = shared_from_this()] {
        self->WriteWhole(ErrorResponse(500, "internal error: no response", "internal_error"));
      });
    } else if (phase_ == Phase::kStreaming) {
      Log(LogLevel::kError, "http handler released a stream without ending it");
      closed_ = true;
      asio::post(strand_, [self = shared_from_this()] { self->Shutdown(); });
    }
  }

 private:
  enum class State { kRequest, kHandling, kRefusing, kLinger, kClosed };
  enum class Phase { kIdle, kWaiting, kWhole, kStreaming, kEnding, kDone };

  void StartRequest() {
    if (state_ == State::kClosed) return;
    state_ = State::kRequest;
    HttpParserLimits limits = core_->options.parser;
    limits.max_body_bytes = core_->options.max_body_bytes;
    parser_.emplace(limits);
    header_checked_ = false;
    body_reservation_ =
        core_->options.memory ? core_->options.memory->Open() : MemoryBudget::Reservation();
    // The first request gets the read timeout; between keep-alive requests the idle one.
    ArmRead(first_ ? core_->options.read_timeout : core_->options.idle_timeout);
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
        ArmRead(core_->options.read_timeout);
        if (core_->header_check) {
          std::optional<HttpResponse> refusal;
          try {
            refusal = core_->header_check(parser_->header());
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
    const auto& options = core_->options;
    if (!options.memory) return true;
    const int64_t want = static_cast<int64_t>(bytes) * std::max(options.body_charge_factor, 1) -
                         body_reservation_.bytes();
    if (want <= 0) return true;
    // Chunked bodies reserve ahead in steps, so the budget is not touched for every chunk.
    const int64_t step = parser_->chunked() ? std::max<int64_t>(want, 1 << 20) : want;
    if (body_reservation_.TryGrow(step) || body_reservation_.TryGrow(want)) return true;
    HttpResponse res = ErrorResponse(
        429,
        "the server is busy: request bodies in flight would exceed its memory budget of " +
            std::to_string(options.memory->limit()) + " bytes; retry later",
        "server_busy");
    res.set(http::field::retry_after, "1");
    if (options.on_refusal) options.on_refusal(parser_->header(), 429);
    RefuseWith(std::move(res));
    return false;
  }

  // One read at a time, for the whole life of the connection: while a request is parsed (its
  // bytes), while a handler works (a disconnect, and pipelined bytes kept for later) and while
  // lingering after a refusal (discarded).
  void ReadMore() {
    if (reading_ || state_ == State::kClosed) return;
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(scratch_),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, size_t n) {
    reading_ = false;
    if (state_ == State::kClosed) return;
    // EOF, a reset or a timeout. Mid-request nobody is left to read an answer; while a handler
    // works it is the disconnect the handler hears about.
    if (ec) return Shutdown();
    switch (state_) {
      case State::kRequest:
        pending_.append(scratch_.data(), n);
        if (!continue_writing_) Process();  // else the 100 Continue's completion does
        return;
      case State::kHandling:
        pending_.append(scratch_.data(), n);
        if (pending_.size() < core_->options.pipeline_bytes) ReadMore();
        return;
      case State::kRefusing:
        return;  // nothing after a refused request is parsed; LingerClose reads on
      case State::kLinger:
        discarded_ += n;
        if (discarded_ > (64u << 20)) return Shutdown();
        return ReadMore();
      case State::kClosed:
        return;
    }
  }

  void SendContinue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    continue_writing_ = true;
    ArmWrite();
    asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->continue_writing_ = false;
                        self->DisarmWrite();
                        if (self->state_ == State::kClosed) return;
                        if (ec) return self->Shutdown();
                        self->Process();
                      });
  }

  void RefuseRequest(int status, const std::string& message, std::string_view code) {
    RefuseWith(ErrorResponse(status, message, code));
  }

  // Answers without dispatching; the request's framing (or its unread body) means the
  // connection cannot carry another request.
  void RefuseWith(HttpResponse response) {
    state_ = State::kRefusing;
    keep_alive_ = false;
    request_error_ = true;
    const bool header_done = parser_ && parser_->header_done();
    version_ = header_done ? parser_->header().version() : 11;
    head_ = header_done && parser_->header().method() == http::verb::head;
    WriteWhole(std::move(response));
  }

  void Dispatch();  // after Exchange

  void WriteWhole(HttpResponse response) {
    if (state_ == State::kClosed) return;
    response.version(version_);
    response.keep_alive(keep_alive_);
    response.prepare_payload();
    ArmWrite();
    if (head_) {
      // RFC 9110 9.3.2: the head a GET would get, Content-Length included, and no body.
      head_only_ = SerializeHead(response);
      asio::async_write(socket_, asio::buffer(head_only_),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          std::string().swap(self->head_only_);
                          self->OnWholeWritten(ec);
                        });
      return;
    }
    response_ = std::make_shared<HttpResponse>(std::move(response));
    http::async_write(socket_, *response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->response_.reset();
                        self->OnWholeWritten(ec);
                      });
  }

  void OnWholeWritten(beast::error_code ec) {
    DisarmWrite();
    if (state_ == State::kClosed) return;
    if (ec) return Shutdown();
    if (state_ == State::kRefusing) return AfterResponse();
    CompleteResponse();
  }

  void ScheduleFlushLocked() {
    if (flushing_) return;
    flushing_ = true;
    asio::post(strand_, [self = shared_from_this()] { self->Flush(); });
  }

  // Writes everything queued so far as one gather write; the stream ends when the queue is
  // empty after EndStream.
  void Flush() {
    if (state_ == State::kClosed) return;
    bool ended = false;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      if (queue_.empty()) {
        flushing_ = false;
        ended = phase_ == Phase::kEnding;
      } else {
        batch_.assign(std::make_move_iterator(queue_.begin()),
                      std::make_move_iterator(queue_.end()));
        queue_.clear();
      }
    }
    if (batch_.empty()) {
      if (ended) CompleteResponse();
      return;
    }
    buffers_.clear();
    for (const std::string& s : batch_) buffers_.push_back(asio::buffer(s));
    ArmWrite();
    asio::async_write(socket_, buffers_,
                      [self = shared_from_this()](beast::error_code ec, size_t n) {
                        self->DisarmWrite();
                        self->batch_.clear();
                        if (self->state_ == State::kClosed) return;
                        if (ec) return self->Shutdown();
                        {
                          std::lock_guard lock(self->mu_);
                          self->queued_bytes_ -= std::min<uint64_t>(self->queued_bytes_, n);
                        }
                        self->Flush();
                      });
  }

  // The response went out in full.
  void CompleteResponse() {
    std::function<void()> callback;  // released outside the lock: it may own the exchange
    {
      std::lock_guard lock(mu_);
      if (phase_ == Phase::kEnding && req_version_ < 11) keep_alive_ = false;
      phase_ = Phase::kDone;
      callback = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
    }
    FinishInFlight();
    AfterResponse();
  }

  void AfterResponse() {
    ReleaseBody();
    if (!keep_alive_) return request_error_ ? LingerClose() : Shutdown();
    StartRequest();
  }

  // After refusing a request mid-body (e.g. 413), the client may still be sending. Closing at
  // once would make the kernel answer its data with a reset that can destroy our response
  // before the client reads it, so stop sending, then read and discard for a bounded time.
  void LingerClose() {
    state_ = State::kLinger;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    ArmRead(std::chrono::seconds(2));
    ReadMore();
  }

  // Closes the connection; a response still under way is a disconnect for its handler.
  void Shutdown() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    std::function<void()> callback;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      if (phase_ != Phase::kIdle && phase_ != Phase::kDone) {
        gone_early_ = true;
        callback = std::move(on_disconnect_);
        on_disconnect_ = nullptr;
      }
      queue_.clear();
      queued_bytes_ = 0;
    }
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
    read_timer_.cancel();
    write_timer_.cancel();
    FinishInFlight();
    ReleaseBody();
    if (callback) callback();
  }

  void ReleaseBody() {
    const uint64_t reserved =
        static_cast<uint64_t>(std::max<int64_t>(body_reservation_.bytes(), 0));
    body_reservation_.Reset();
    const uint64_t trim_at = core_->options.trim_after_body_bytes;
    if (trim_at > 0 && reserved >= trim_at) malloc_trim(0);
  }

  void FinishInFlight() {
    if (!counted_) return;
    counted_ = false;
    core_->in_flight.fetch_sub(1);
  }

  // Deadlines: a timer that fires closes the connection unless it was moved since (a handler
  // already queued when the deadline was re-armed sees the later expiry and does nothing).
  void ArmRead(Clock::duration d) { Arm(read_timer_, d); }
  void DisarmRead() { read_timer_.expires_at(Clock::time_point::max()); }
  void ArmWrite() { Arm(write_timer_, core_->options.write_timeout); }
  void DisarmWrite() { write_timer_.expires_at(Clock::time_point::max()); }

  void Arm(asio::steady_timer& timer, Clock::duration d) {
    if (state_ == State::kClosed) return;
    timer.expires_after(d);
    timer.async_wait([self = shared_from_this(), &timer](beast::error_code ec) {
      if (ec || timer.expiry() > Clock::now()) return;
      self->Shutdown();
    });
  }

  // Declared first so it is destroyed last: the socket and timers below live on its
  // io_context.
  std::shared_ptr<HttpServer::Core> core_;
  tcp::socket socket_;
  asio::any_io_executor strand_;
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;

  // Strand-only.
  State state_ = State::kRequest;
  std::string pending_;  // received, not yet parsed (bounded by pipeline_bytes while handling)
  std::optional<HttpRequestParser> parser_;
  MemoryBudget::Reservation body_reservation_;
  std::shared_ptr<HttpResponse> response_;  // the whole response being written
  std::string head_only_;                   // or its head alone, answering HEAD
  std::vector<std::string> batch_;          // stream bytes being written
  std::vector<asio::const_buffer> buffers_;
  bool reading_ = false;
  bool continue_writing_ = false;
  bool keep_alive_ = true;
  bool first_ = true;
  bool header_checked_ = false;
  bool request_error_ = false;
  bool counted_ = false;  // the current request is counted in core_->in_flight
  size_t discarded_ = 0;
  std::array<char, 65536> scratch_{};
  unsigned version_ = 11;
  bool head_ = false;  // the current request is a HEAD: responses carry no body

  // Shared with the exchanges.
  mutable std::mutex mu_;
  uint64_t seq_ = 0;  // the current request
  Phase phase_ = Phase::kIdle;
  bool closed_ = false;      // no more output: the connection is closed or closing
  bool gone_early_ = false;  // the current request lost its connection before its response
  unsigned req_version_ = 11;
  bool req_keep_alive_ = true;
  bool req_head_ = false;
  std::string req_target_;  // for deadline_response
  std::function<void()> on_disconnect_;
  std::deque<std::string> queue_;  // stream bytes not yet handed to the socket
  uint64_t queued_bytes_ = 0;      // in queue_ and in the write under way
  bool flushing_ = false;          // a Flush is posted or a stream write is under way
};

class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> session, uint64_t seq)
      : session_(std::move(session)), seq_(seq) {}
  ~Exchange() override { session_->Abandon(seq_); }

  void Respond(HttpResponse response) override { session_->Respond(seq_, std::move(response)); }
  void StartStream(HttpResponse head) override { session_->StartStream(seq_, std::move(head)); }
  bool Write(std::string data) override { return session_->Write(seq_, std::move(data)); }
  void EndStream() override { session_->EndStream(seq_); }
  void OnDisconnect(std::function<void()> callback) override {
    session_->OnDisconnect(seq_, std::move(callback));
  }
  bool connected() const override { return session_->connected(); }

 private:
  std::shared_ptr<Session> session_;
  const uint64_t seq_;
};

void Session::Dispatch() {
  HttpRequest request = parser_->Release();
  keep_alive_ = request.keep_alive();
  version_ = request.version();
  head_ = request.method() == http::verb::head;
  DisarmRead();  // no deadline while the handler works; each write sets its own
  state_ = State::kHandling;
  counted_ = true;
  core_->in_flight.fetch_add(1);
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    seq = ++seq_;
    phase_ = Phase::kWaiting;
    gone_early_ = false;
    req_version_ = version_;
    req_keep_alive_ = keep_alive_;
    req_head_ = head_;
    req_target_ = std::string(request.target());
  }
  auto exchange = std::make_shared<Exchange>(shared_from_this(), seq);
  try {
    core_->handler(std::move(request), exchange);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "http handler threw: ", e.what());
    exchange->Respond(ErrorResponse(500, "internal error", "internal_error"));
  }
  ReadMore();
}

ExchangeHandler AdaptResponder(HttpHandler handler) {
  return [handler = std::move(handler)](HttpRequest&& request,
                                        std::shared_ptr<HttpExchange> exchange) {
    handler(std::move(request),
            [exchange](HttpResponse response) { exchange->Respond(std::move(response)); });
  };
}

}  // namespace

HttpResponse JsonResponse(int status, const std::string& body) {
  HttpResponse res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "m3serve");
  res.body() = body;
  return res;
}

HttpServer::HttpServer(HttpServerOptions options, ExchangeHandler handler,
                       HttpHeaderCheck header_check)
    : core_(
          std::make_shared<Core>(std::move(options), std::move(handler), std::move(header_check))),
      acceptor_(asio::make_strand(core_->ioc)),
      accept_backoff_(acceptor_.get_executor()) {}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeaderCheck header_check)
    : HttpServer(std::move(options), AdaptResponder(std::move(handler)), std::move(header_check)) {}

HttpServer::~HttpServer() {
  Stop(std::chrono::milliseconds(0));
}

int64_t HttpServer::in_flight() const {
  return core_->in_flight.load();
}

int64_t HttpServer::connections() const {
  return core_->connections.load();
}

void HttpServer::Start() {
  const auto& options = core_->options;
  beast::error_code ec;
  auto address = asio::ip::make_address(options.host, ec);
  if (ec) throw Error(ErrorCode::kInvalidArgument, "invalid listen address '" + options.host + "'");
  tcp::endpoint endpoint(address, options.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(ErrorCode::kUnavailable, "cannot listen on " + options.host + ":" +
                                             std::to_string(options.port) + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  int n = options.threads < 1 ? 1 : options.threads;
  auto core = core_;
  for (int i = 0; i < n; ++i) threads_.emplace_back([core] { core->ioc.run(); });
}

void HttpServer::Accept() {
  acceptor_.async_accept(asio::make_strand(core_->ioc),
                         [this](beast::error_code ec, tcp::socket socket) {
                           if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
                           if (ec) return OnAcceptError(ec);
                           backoff_ = std::chrono::milliseconds(0);
                           auto session = std::make_shared<Session>(std::move(socket), core_);
                           bool closing = false;
                           {
                             std::lock_guard lock(core_->mu);
                             closing = core_->closing;
                             if (!closing) core_->sessions.emplace(session.get(), session);
                           }
                           if (closing) return;  // the socket closes with the session
                           if (core_->connections.load() > core_->options.max_connections) {
                             session->Refuse(core_->options.max_connections);
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

void HttpServer::Stop(std::chrono::milliseconds grace, const std::function<void()>& at_deadline) {
  if (stopped_) return;
  stopped_ = true;
  if (threads_.empty()) return;  // never started: no sessions, nothing runs
  // Keeps the threads running while handlers finish, even when no socket operation is pending
  // (a session that stopped reading at its pipelining bound).
  auto guard = asio::make_work_guard(core_->ioc);
  StopAccepting();
  const auto until = std::chrono::steady_clock::now() + grace;
  while (core_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if ((at_deadline || core_->options.deadline_response) && core_->in_flight.load() > 0) {
    if (at_deadline) at_deadline();
    // Requests still being prepared (no response begun) get their error answer too.
    std::vector<std::shared_ptr<Session>> waiting;
    {
      std::lock_guard lock(core_->mu);
      for (auto& entry : core_->sessions) {
        if (auto session = entry.second.lock()) waiting.push_back(std::move(session));
      }
    }
    size_t answered = 0;
    for (auto& session : waiting) answered += session->AnswerAtDeadline() ? 1 : 0;
    waiting.clear();
    if (answered > 0) {
      Log(LogLevel::kWarn, "http server: ", answered,
          " requests still being prepared at the end of the grace period answered with an error");
    }
    // Bounded: a client that does not read its last bytes is closed on anyway.
    const auto flushed = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (core_->in_flight.load() > 0 && std::chrono::steady_clock::now() < flushed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(core_->mu);
    core_->closing = true;
    for (auto& entry : core_->sessions) {
      if (auto session = entry.second.lock()) live.push_back(std::move(session));
    }
  }
  for (auto& session : live) session->Close();
  live.clear();  // outside the lock: a session's destructor takes it
  guard.reset();
  // With every socket closed and every timer cancelled the threads run out of work and
  // return; the io_context is left without queued handlers (which would own sessions that
  // own it). A thread blocked in a handler is waited for a while, then the loop is stopped.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!core_->ioc.stopped() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!core_->ioc.stopped()) {
    Log(LogLevel::kWarn, "http server: network threads still busy after closing; stopping them");
    core_->ioc.stop();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace m3::net
