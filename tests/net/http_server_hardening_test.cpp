// The HTTP server under hostile clients (issue 11): trailers that used to kill the process,
// transfer codings that let a body run as a second request, the connection cap, the shared
// body budget, refusals before the body is read, 100-continue, and the accept loop when the
// process is out of descriptors.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/net/http_server.h"
#include "tests/net/loopback_http.h"

namespace {

using m3::net::HttpRequest;
using m3::net::HttpServer;
using m3::net::HttpServerOptions;
using m3::net::Responder;

int Connect(uint16_t port) {
  const int fd = m3::test::ConnectLoopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

void Send(int fd, const std::string& data) {
  // The server may close early; what it answered is what counts.
  (void)m3::test::SendAll(fd, data);
}

// Everything the server sends until it closes the connection or `timeout_ms` passes.
std::string ReadAll(int fd, int timeout_ms) {
  std::string data;
  char buf[8192];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

// Reads until `marker` has arrived (or timeout); returns what arrived.
std::string ReadUntil(int fd, const std::string& marker, int timeout_ms) {
  std::string data;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (data.find(marker) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

int Responses(const std::string& wire) {
  int n = 0;
  for (size_t at = wire.find("HTTP/1.1 "); at != std::string::npos;
       at = wire.find("HTTP/1.1 ", at + 1)) {
    ++n;
  }
  return n;
}

// A server whose handler answers "path:body" and counts what it dispatched.
struct EchoServer {
  std::atomic<int> dispatched{0};
  std::vector<std::string> paths;
  std::mutex mu;
  HttpServer server;

  explicit EchoServer(HttpServerOptions options, m3::net::HttpHeaderCheck check = {})
      : server(
            std::move(options),
            [this](HttpRequest&& req, Responder respond) {
              ++dispatched;
              {
                std::lock_guard lock(mu);
                paths.emplace_back(req.target());
              }
              respond(m3::net::JsonResponse(200, std::string(req.target()) + ":" + req.body()));
            },
            std::move(check)) {
    server.Start();
  }
  ~EchoServer() { server.Stop(std::chrono::milliseconds(500)); }
  bool Healthy() { return m3::test::HttpCall(server.port(), "GET", "/health").status == 200; }
};

}  // namespace

TEST_CASE("server: a 65535-byte trailer value is a 431, and the server stays up (row 1)") {
  EchoServer s(HttpServerOptions{});
  for (size_t size : {size_t{65535}, size_t{70000}}) {
    int fd = Connect(s.server.port());
    Send(fd,
         "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n"
         "X-Big: " +
             std::string(size, 'v') + "\r\n\r\n");
    const std::string got = ReadAll(fd, 5000);
    ::close(fd);
    CHECK(got.find(" 431 ") != std::string::npos);
    CHECK(got.find("trailer") != std::string::npos);
    CHECK(s.Healthy());
  }
  CHECK(s.dispatched.load() == 2);  // the two health checks only
}

TEST_CASE("server: an unknown transfer coding is a 400 and the body never runs (row 7)") {
  EchoServer s(HttpServerOptions{});
  for (const char* te : {"xchunked", "chunked, identity", "gzip"}) {
    CAPTURE(te);
    int fd = Connect(s.server.port());
    // The "body" is a second request: a server that takes the body as empty runs it.
    Send(fd, std::string("POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ") + te +
                 "\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string got = ReadAll(fd, 5000);  // the server must close
    ::close(fd);
    CHECK(got.rfind("HTTP/1.1 400 ", 0) == 0);
    CHECK(got.find("Transfer-Encoding") != std::string::npos);
    CHECK(got.find("Connection: close") != std::string::npos);
    CHECK(Responses(got) == 1);
  }
  CHECK(s.dispatched.load() == 0);
  // HTTP/1.1 without Host, chunked on HTTP/1.0 (row 10).
  for (const std::string& bad :
       {std::string("GET /a HTTP/1.1\r\n\r\n"),
        std::string("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n")}) {
    int fd = Connect(s.server.port());
    Send(fd, bad);
    const std::string got = ReadAll(fd, 5000);
    ::close(fd);
    CHECK(got.find(" 400 ") != std::string::npos);
  }
  CHECK(s.dispatched.load() == 0);
}

TEST_CASE("server: connection cap answers 503 at once; the budget answers 429 before the body") {
  HttpServerOptions options;
  options.max_connections = 3;
  options.memory = std::make_shared<m3::net::MemoryBudget>(10000);
  EchoServer s(options);
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(Connect(s.server.port()));
  // Let the server see them.
  for (int i = 0; i < 200 && s.server.connections() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(s.server.connections() == 3);
  int over = Connect(s.server.port());
  const std::string got = ReadAll(over, 5000);
  ::close(over);
  CHECK(got.find(" 503 ") != std::string::npos);
  CHECK(got.find("connections") != std::string::npos);
  for (int fd : idle) ::close(fd);
  for (int i = 0; i < 200 && s.server.connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  // 20000 declared bytes against a 10000-byte budget: refused from the header alone.
  int fd = Connect(s.server.port());
  Send(fd, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n");
  const std::string busy = ReadUntil(fd, "\r\n\r\n", 5000);
  ::close(fd);
  CHECK(busy.find(" 429 ") != std::string::npos);
  CHECK(busy.find("Retry-After: 1") != std::string::npos);
  // Chunked bodies are charged as they arrive.
  fd = Connect(s.server.port());
  std::string chunks = "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 30; ++i) chunks += "3e8\r\n" + std::string(1000, 'c') + "\r\n";
  Send(fd, chunks + "0\r\n\r\n");
  const std::string chunked_busy = ReadAll(fd, 5000);
  CHECK(chunked_busy.find(" 429 ") != std::string::npos);
  // OpenAI's type for 429s, not invalid_request_error: the request itself was fine.
  CHECK(chunked_busy.find(R"("type":"rate_limit_error")") != std::string::npos);
  CHECK(chunked_busy.find(R"("code":"server_busy")") != std::string::npos);
  ::close(fd);
  // Within the budget, and the reservation is returned after each answer.
  for (int i = 0; i < 3; ++i) {
    CHECK(m3::test::HttpCall(s.server.port(), "POST", "/ok", std::string(5000, 'b')).status == 200);
  }
  CHECK(options.memory->used() == 0);
  CHECK(s.dispatched.load() == 3);
}

TEST_CASE("server: the header check refuses before the body; 100-continue is honoured") {
  HttpServerOptions options;
  EchoServer s(options, [](const HttpRequest& header) -> std::optional<m3::net::HttpResponse> {
    if (header.target() == "/refused") return m3::net::JsonResponse(404, "{\"error\":\"no\"}");
    return std::nullopt;
  });
  // The body (50 MB declared) is never sent: the answer must come from the header alone.
  int fd = Connect(s.server.port());
  Send(fd, "POST /refused HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n");
  CHECK(ReadUntil(fd, "\r\n\r\n", 5000).find(" 404 ") != std::string::npos);
  ::close(fd);

  fd = Connect(s.server.port());
  Send(fd, "POST /go HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  CHECK(ReadUntil(fd, "\r\n\r\n", 5000).rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0);
  Send(fd, "hello");
  CHECK(ReadUntil(fd, "/go:hello", 5000).find("/go:hello") != std::string::npos);
  ::close(fd);
  CHECK(s.dispatched.load() == 1);
}

TEST_CASE("server: out of descriptors, accept backs off instead of spinning (row 4)") {
  EchoServer s(HttpServerOptions{});
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  int open_fds = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open_fds;
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(open_fds + 8);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  // Connect until this process is out of descriptors; the server, in the same process, then
  // cannot accept the connections waiting in its backlog.
  std::vector<int> clients;
  for (int i = 0; i < 64; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(s.server.port());
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    clients.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ::getrusage(RUSAGE_SELF, &after);
  auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000ll + r.ru_utime.tv_usec +
           r.ru_stime.tv_usec;
  };
  const long long used = cpu_us(after) - cpu_us(before);
  for (int fd : clients) ::close(fd);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  // A retry loop without a pause burns the whole second on one core.
  CHECK(used < 300000);
  // Once descriptors are free again, the server answers.
  bool healthy = false;
  for (int i = 0; i < 50 && !healthy; ++i) {
    healthy = s.Healthy();
    if (!healthy) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(healthy);
}
