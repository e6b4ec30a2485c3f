// The HTTP server's exchanges (issue 10): streamed (chunked, SSE) responses written from other
// threads, keep-alive after a stream, disconnect notice while a handler works, the bound on a
// stream's queue, the per-write timeout, Stop waiting for streams, and exchanges used after
// the server is gone.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway/net/http_server.h"
#include "tests/net/loopback_http.h"

namespace {

using m3::net::HttpExchange;
using m3::net::HttpRequest;
using m3::net::HttpResponse;
using m3::net::HttpServer;
using m3::net::HttpServerOptions;
using Clock = std::chrono::steady_clock;
using ExchangePtr = std::shared_ptr<HttpExchange>;

constexpr int kWaitMs = 5000;  // the bound of every wait; none is expected to come close

int Connect(uint16_t port) {
  const int fd = m3::test::ConnectLoopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

std::string Get(const std::string& target, const std::string& version = "HTTP/1.1") {
  return "GET " + target + " " + version + "\r\nHost: x\r\n\r\n";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Reply {
  int status = 0;                              // 0: no complete response
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool chunked = false;
};

// A client connection that reads responses one after another (keep-alive), decoding chunked
// bodies; `closed` tells whether the server closed the connection.
class Client {
 public:
  explicit Client(uint16_t port) : fd_(Connect(port)) {}
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }
  void Send(const std::string& data) { REQUIRE(m3::test::SendAll(fd_, data)); }
  bool closed() const { return eof_; }

  // The next whole response; status 0 when it did not complete (closed or timed out).
  // `until_close`: a body without length that runs to the end of the connection.
  Reply Read(bool until_close = false) {
    const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
    for (;;) {
      Reply reply;
      const size_t used = Parse(reply, until_close && eof_);
      if (used > 0) {
        in_.erase(0, used);
        return reply;
      }
      if (eof_ || !Fill(until)) return Reply{};
    }
  }

  // Reads until `marker` has arrived (not consuming anything).
  bool ReadUntil(const std::string& marker) {
    const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (in_.find(marker) == std::string::npos) {
      if (eof_ || !Fill(until)) return false;
    }
    return true;
  }

  // Whether the server closes the connection (EOF or reset) within the wait.
  bool WaitClosed() {
    const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (!eof_) {
      if (!Fill(until)) return eof_;
    }
    return true;
  }

  const std::string& raw() const { return in_; }

 private:
  bool Fill(Clock::time_point until) {
    const m3::test::Received r = m3::test::ReceiveSome(fd_, until, in_);
    if (r == m3::test::Received::kClosed) eof_ = true;
    return r != m3::test::Received::kTimedOut;
  }

  // Bytes of one complete response at the front of in_, or 0.
  size_t Parse(Reply& reply, bool at_eof) const {
    const size_t head_end = in_.find("\r\n\r\n");
    if (head_end == std::string::npos) return 0;
    std::istringstream head(in_.substr(0, head_end));
    std::string line;
    std::getline(head, line);
    if (line.rfind("HTTP/1.", 0) != 0) return 0;
    reply.status = std::stoi(line.substr(9, 3));
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      reply.headers[Lower(line.substr(0, colon))] = value;
    }
    size_t at = head_end + 4;
    if (Lower(reply.headers["transfer-encoding"]) == "chunked") {
      reply.chunked = true;
      for (;;) {
        const size_t eol = in_.find("\r\n", at);
        if (eol == std::string::npos) return 0;
        const size_t size = std::stoul(in_.substr(at, eol - at), nullptr, 16);
        if (size == 0) {
          // No trailers: the last chunk is followed by the empty line.
          if (in_.size() < eol + 4) return 0;
          REQUIRE(in_.compare(eol + 2, 2, "\r\n") == 0);
          return eol + 4;
        }
        if (in_.size() < eol + 2 + size + 2) return 0;
        reply.body += in_.substr(eol + 2, size);
        REQUIRE(in_.compare(eol + 2 + size, 2, "\r\n") == 0);
        at = eol + 2 + size + 2;
      }
    }
    if (reply.headers.count("content-length")) {
      const size_t length = std::stoul(reply.headers["content-length"]);
      if (in_.size() < at + length) return 0;
      reply.body = in_.substr(at, length);
      return at + length;
    }
    if (!at_eof) return 0;
    reply.body = in_.substr(at);
    return in_.size();
  }

  int fd_ = -1;
  std::string in_;
  bool eof_ = false;
};

// Exchanges handed over by handlers, and a counter to wait on.
class Inbox {
 public:
  void Put(ExchangePtr exchange) {
    std::lock_guard lock(mu_);
    exchanges_.push_back(std::move(exchange));
    cv_.notify_all();
  }
  // The n-th exchange (0-based), waiting for it.
  ExchangePtr Take(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return exchanges_.size() > n; });
    REQUIRE(exchanges_.size() > n);
    return exchanges_[n];
  }
  void Clear() {
    std::lock_guard lock(mu_);
    exchanges_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ExchangePtr> exchanges_;
};

// Counts events (e.g. disconnect callbacks) and remembers the thread of the last one.
class Counter {
 public:
  void Hit() {
    std::lock_guard lock(mu_);
    ++count_;
    thread_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  bool WaitFor(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard lock(mu_);
    return count_;
  }
  std::thread::id thread() {
    std::lock_guard lock(mu_);
    return thread_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
  std::thread::id thread_;
};

HttpResponse EventStreamHead() {
  HttpResponse head{boost::beast::http::status::ok, 11};
  head.set(boost::beast::http::field::content_type, "text/event-stream");
  head.set(boost::beast::http::field::cache_control, "no-cache");
  return head;
}

std::string Event(int i) {
  return "data: {\"n\": " + std::to_string(i) + "}\n\n";
}

// Waits (bounded) until the server has no request in flight.
bool Drained(const HttpServer& server) {
  const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (server.in_flight() > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return server.in_flight() == 0;
}

// Routes: /sse streams `events` events from another thread; /whole answers from another
// thread; /hold hands the exchange to the test without answering.
struct StreamServer {
  Inbox held;
  int events = 10;
  std::vector<std::thread> workers;
  std::mutex workers_mu;
  HttpServer server;

  explicit StreamServer(HttpServerOptions options = {})
      : server(std::move(options), [this](HttpRequest&& req, ExchangePtr exchange) {
          const std::string target(req.target());
          if (target == "/hold") return held.Put(std::move(exchange));
          std::lock_guard lock(workers_mu);
          if (target == "/sse") {
            workers.emplace_back([exchange, n = events] {
              exchange->StartStream(EventStreamHead());
              for (int i = 0; i < n; ++i) {
                if (!exchange->Write(Event(i))) return;
              }
              exchange->EndStream();
            });
          } else {
            workers.emplace_back([exchange, target] {
              exchange->Respond(m3::net::JsonResponse(200, "whole:" + target));
            });
          }
        }) {
    server.Start();
  }
  ~StreamServer() {
    server.Stop(std::chrono::milliseconds(1000));
    for (auto& t : workers) t.join();
  }
};

std::string Events(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += Event(i);
  return out;
}

}  // namespace

TEST_CASE("stream: SSE events arrive in order, chunk-decoded; keep-alive continues after") {
  StreamServer s;
  Client c(s.server.port());
  for (int round = 0; round < 3; ++round) {
    c.Send(Get("/sse"));
    const Reply stream = c.Read();
    REQUIRE(stream.status == 200);
    CHECK(stream.chunked);
    CHECK(stream.headers.count("content-length") == 0);
    CHECK(stream.headers.at("content-type") == "text/event-stream");
    CHECK(stream.body == Events(s.events));
    // The whole-response path through the exchange, on the same connection.
    c.Send(Get("/whole"));
    const Reply whole = c.Read();
    CHECK(whole.status == 200);
    CHECK(whole.body == "whole:/whole");
  }
  CHECK(!c.closed());
  CHECK(Drained(s.server));

  // Two requests sent together: the second is kept while the stream of the first runs.
  Client p(s.server.port());
  p.Send(Get("/sse") + Get("/whole"));
  CHECK(p.Read().body == Events(s.events));
  CHECK(p.Read().body == "whole:/whole");

  // HTTP/1.0 has no chunked coding: the body runs to the end of the connection.
  Client old(s.server.port());
  old.Send(Get("/sse", "HTTP/1.0"));
  CHECK(old.WaitClosed());
  const Reply raw = old.Read(/*until_close=*/true);
  CHECK(raw.status == 200);
  CHECK(!raw.chunked);
  CHECK(raw.body == Events(s.events));
}

TEST_CASE("stream: one exchange, one answer; misuse is ignored") {
  StreamServer s;
  Client c(s.server.port());
  c.Send(Get("/hold"));
  ExchangePtr ex = s.held.Take(0);
  CHECK(ex->connected());
  CHECK(!ex->Write("before the stream"));  // no stream started
  ex->Respond(m3::net::JsonResponse(201, "first"));
  ex->Respond(m3::net::JsonResponse(500, "second"));
  ex->StartStream(EventStreamHead());
  CHECK(!ex->Write("after a whole response"));
  ex->EndStream();
  const Reply reply = c.Read();
  CHECK(reply.status == 201);
  CHECK(reply.body == "first");
  // An empty write is no chunk (it would end the body).
  c.Send(Get("/hold"));
  ExchangePtr next = s.held.Take(1);
  next->StartStream(EventStreamHead());
  CHECK(next->Write(""));
  CHECK(next->Write("x"));
  CHECK(!ex->Write("a stale exchange cannot write into the next response"));
  next->EndStream();
  CHECK(!next->Write("after the end"));
  const Reply streamed = c.Read();
  CHECK(streamed.body == "x");
  // The response was sent in full (the client may have it before the server has seen its
  // write complete, so wait for that): a disconnect callback set now never runs.
  REQUIRE(Drained(s.server));
  Counter never;
  next->OnDisconnect([&] { never.Hit(); });
  c.Close();
  CHECK(Drained(s.server));
  // A handler that lets its exchange go without answering: the client gets a 500.
  Client d(s.server.port());
  d.Send(Get("/hold"));
  ExchangePtr third = s.held.Take(2);
  s.held.Clear();
  ex.reset();
  next.reset();
  third.reset();
  const Reply dropped = d.Read();
  CHECK(dropped.status == 500);
  CHECK(dropped.body.find("internal_error") != std::string::npos);
  CHECK(never.count() == 0);
}

TEST_CASE("stream: a client that leaves mid-stream is noticed at once; later writes fail") {
  StreamServer s;
  Client c(s.server.port());
  c.Send(Get("/hold"));
  ExchangePtr ex = s.held.Take(0);
  Counter gone;
  ex->OnDisconnect([&] { gone.Hit(); });
  ex->StartStream(EventStreamHead());
  CHECK(ex->Write("data: first\n\n"));
  REQUIRE(c.ReadUntil("data: first"));
  c.Close();
  CHECK(gone.WaitFor(1));
  CHECK(gone.thread() != std::this_thread::get_id());  // a network thread
  CHECK(!ex->connected());
  CHECK(!ex->Write("data: late\n\n"));
  ex->EndStream();
  // Already disconnected: a callback set now runs at once, on this thread.
  Counter late;
  ex->OnDisconnect([&] { late.Hit(); });
  CHECK(late.count() == 1);
  CHECK(late.thread() == std::this_thread::get_id());
  CHECK(Drained(s.server));
  CHECK(gone.count() == 1);

  // The same while a whole response is being prepared.
  Client w(s.server.port());
  w.Send(Get("/hold"));
  ExchangePtr whole = s.held.Take(1);
  Counter whole_gone;
  whole->OnDisconnect([&] { whole_gone.Hit(); });
  w.Close();
  CHECK(whole_gone.WaitFor(1));
  whole->Respond(m3::net::JsonResponse(200, "nobody is there"));
  CHECK(Drained(s.server));
  CHECK(whole_gone.count() == 1);
}

TEST_CASE("stream: bytes pipelined while a handler works are kept for the next request") {
  StreamServer s;
  Client c(s.server.port());
  c.Send(Get("/hold"));
  ExchangePtr ex = s.held.Take(0);
  // The session is reading for a disconnect now; these bytes are the next request.
  c.Send(Get("/whole"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(ex->connected());
  ex->Respond(m3::net::JsonResponse(200, "held"));
  CHECK(c.Read().body == "held");
  CHECK(c.Read().body == "whole:/whole");
}

TEST_CASE("stream: a client that never reads is disconnected at the queue bound") {
  HttpServerOptions options;
  options.stream_queue_bytes = 64 << 10;
  StreamServer s(options);
  Client c(s.server.port());  // sends its request, then never reads
  c.Send(Get("/hold"));
  ExchangePtr ex = s.held.Take(0);
  Counter gone;
  ex->OnDisconnect([&] { gone.Hit(); });
  ex->StartStream(EventStreamHead());
  const std::string chunk(16 << 10, 'e');
  uint64_t accepted = 0;
  // What the kernel buffers on loopback (a few MB at most) plus the bound; far below the cap.
  const uint64_t cap = 256ull << 20;
  while (accepted < cap && ex->Write(chunk)) accepted += chunk.size();
  CHECK(accepted < (32ull << 20));
  CHECK(gone.WaitFor(1));
  CHECK(!ex->connected());
  CHECK(!ex->Write(chunk));
  CHECK(c.WaitClosed());
  CHECK(Drained(s.server));
}

TEST_CASE("stream: the write timeout applies to each write of a stream") {
  HttpServerOptions options;
  options.stream_queue_bytes = 256ull << 20;  // the timeout, not the bound, ends this one
  options.write_timeout = std::chrono::milliseconds(300);
  StreamServer s(options);
  Client c(s.server.port());
  c.Send(Get("/hold"));
  ExchangePtr ex = s.held.Take(0);
  Counter gone;
  ex->OnDisconnect([&] { gone.Hit(); });
  ex->StartStream(EventStreamHead());
  const std::string chunk(1 << 20, 't');
  // More than loopback's socket buffers hold, so a write stays pending until its deadline.
  for (int i = 0; i < 48 && ex->Write(chunk); ++i) {
  }
  CHECK(gone.WaitFor(1));
  CHECK(!ex->Write(chunk));
  CHECK(Drained(s.server));
}

TEST_CASE("stream: writers on several threads keep each stream's order") {
  StreamServer s;
  constexpr int kStreams = 3;
  constexpr int kThreads = 4;
  constexpr int kEvents = 300;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::thread> writers;
  for (int k = 0; k < kStreams; ++k) {
    clients.push_back(std::make_unique<Client>(s.server.port()));
    clients.back()->Send(Get("/hold"));
    ExchangePtr ex = s.held.Take(static_cast<size_t>(k));
    ex->StartStream(EventStreamHead());
    // Each stream gets its writers; the last one to finish ends the stream.
    auto left = std::make_shared<std::atomic<int>>(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([ex, left, k, t] {
        for (int i = 0; i < kEvents; ++i) {
          std::ostringstream line;
          line << 's' << k << " t" << t << ' ' << i << '\n';
          CHECK(ex->Write(line.str()));
        }
        if (left->fetch_sub(1) == 1) ex->EndStream();
      });
    }
  }
  for (auto& w : writers) w.join();
  for (int k = 0; k < kStreams; ++k) {
    const Reply reply = clients[static_cast<size_t>(k)]->Read();
    REQUIRE(reply.status == 200);
    std::vector<int> next(kThreads, 0);
    std::istringstream lines(reply.body);
    std::string stream, thread;
    int i = 0;
    int total = 0;
    while (lines >> stream >> thread >> i) {
      CHECK(stream.substr(1) == std::to_string(k));
      const int t = std::stoi(thread.substr(1));
      REQUIRE(t >= 0);
      REQUIRE(t < kThreads);
      CHECK(i == next[static_cast<size_t>(t)]);
      next[static_cast<size_t>(t)] = i + 1;
      ++total;
    }
    CHECK(total == kThreads * kEvents);
  }
}

TEST_CASE("stream: Stop waits for a stream in flight, then closes; Stop(0) cuts it off") {
  Inbox held;
  Counter gone;
  std::thread writer;
  {
    HttpServer server(HttpServerOptions{},
                      [&](HttpRequest&&, ExchangePtr exchange) { held.Put(std::move(exchange)); });
    server.Start();
    Client c(server.port());
    c.Send(Get("/slow"));
    ExchangePtr ex = held.Take(0);
    ex->StartStream(EventStreamHead());
    writer = std::thread([ex] {
      for (int i = 0; i < 10; ++i) {
        ex->Write(Event(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ex->EndStream();
    });
    server.Stop(std::chrono::milliseconds(kWaitMs));
    const Reply reply = c.Read();
    CHECK(reply.status == 200);
    CHECK(reply.body == Events(10));
    CHECK(c.WaitClosed());
    writer.join();
  }
  {
    HttpServer server(HttpServerOptions{},
                      [&](HttpRequest&&, ExchangePtr exchange) { held.Put(std::move(exchange)); });
    server.Start();
    Client c(server.port());
    c.Send(Get("/slow"));
    ExchangePtr ex = held.Take(1);
    ex->OnDisconnect([&] { gone.Hit(); });
    ex->StartStream(EventStreamHead());
    CHECK(ex->Write(Event(0)));
    REQUIRE(c.ReadUntil(Event(0)));
    server.Stop(std::chrono::milliseconds(0));
    CHECK(gone.count() == 1);  // the server closed the connection for it
    CHECK(!ex->Write(Event(1)));
    CHECK(c.WaitClosed());
    CHECK(c.Read().status == 0);  // no last chunk: the client can tell it was cut off
  }
}

TEST_CASE("stream: at the grace period's end a request with no response begun gets the answer") {
  // A handler still preparing (it holds the exchange, answers nothing) when Stop's grace period
  // ends: its client reads deadline_response, not a bare close; a stream already started is
  // left to at_deadline (here: cut), and a request answered in time is untouched.
  Inbox held;
  HttpServerOptions options;
  std::string seen_target;
  options.deadline_response = [&](const std::string& target) {
    seen_target = target;
    HttpResponse res = m3::net::JsonResponse(503, R"({"error":"shutting down"})");
    return res;
  };
  HttpServer server(options,
                    [&](HttpRequest&&, ExchangePtr exchange) { held.Put(std::move(exchange)); });
  server.Start();
  Client preparing(server.port());
  preparing.Send(Get("/v1/preparing?x=1"));
  ExchangePtr waiting = held.Take(0);
  Client streaming(server.port());
  streaming.Send(Get("/streaming"));
  ExchangePtr stream = held.Take(1);
  stream->StartStream(EventStreamHead());
  REQUIRE(stream->Write(Event(0)));
  REQUIRE(streaming.ReadUntil(Event(0)));
  bool at_deadline_ran = false;
  const auto t0 = Clock::now();
  server.Stop(std::chrono::milliseconds(100), [&] { at_deadline_ran = true; });
  CHECK(at_deadline_ran);
  CHECK(Clock::now() - t0 < std::chrono::milliseconds(kWaitMs));
  const Reply reply = preparing.Read();
  CHECK(reply.status == 503);
  CHECK(reply.body == R"({"error":"shutting down"})");
  CHECK(seen_target == "/v1/preparing?x=1");
  CHECK(preparing.WaitClosed());
  // The handler's late answer is ignored (the exchange has its answer).
  waiting->Respond(m3::net::JsonResponse(200, "{}"));
  CHECK(streaming.WaitClosed());
}

TEST_CASE("stream: exchanges and Responders used or released after the server is gone") {
  Inbox held;
  std::vector<m3::net::Responder> responders;
  std::mutex mu;
  std::condition_variable cv;
  Counter gone;
  ExchangePtr ex;
  {
    HttpServer server(HttpServerOptions{},
                      [&](HttpRequest&&, ExchangePtr exchange) { held.Put(std::move(exchange)); });
    server.Start();
    Client c(server.port());
    c.Send(Get("/held"));
    ex = held.Take(0);
    ex->OnDisconnect([&] { gone.Hit(); });
    held.Clear();
  }  // the server is destroyed with the exchange still held
  CHECK(gone.count() == 1);
  CHECK(!ex->connected());
  ex->Respond(m3::net::JsonResponse(200, "too late"));
  ex->StartStream(EventStreamHead());
  CHECK(!ex->Write("too late"));
  ex->EndStream();
  Counter late;
  ex->OnDisconnect([&] { late.Hit(); });
  CHECK(late.count() == 1);
  ex.reset();  // the last reference to the session: it must not touch the dead server

  // The Responder interface, as gateway/preprocess/preprocess_http uses it.
  {
    HttpServer server(HttpServerOptions{}, [&](HttpRequest&&, m3::net::Responder respond) {
      std::lock_guard lock(mu);
      responders.push_back(std::move(respond));
      cv.notify_all();
    });
    server.Start();
    Client c(server.port());
    c.Send(Get("/held"));
    std::unique_lock lock(mu);
    REQUIRE(
        cv.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return !responders.empty(); }));
  }
  responders.front()(m3::net::JsonResponse(200, "too late"));
  responders.clear();
}
