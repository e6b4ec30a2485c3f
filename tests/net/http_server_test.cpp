// The Beast HTTP server on its own: keep-alive, answers from other threads, the body limit
// and the read timeout.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gateway/net/http_server.h"
#include "tests/net/loopback_http.h"

namespace {

int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// Reads until `count` complete responses (by Content-Length) arrived, EOF, or timeout.
std::string ReadResponses(int fd, int count, int timeout_ms) {
  std::string data;
  char buf[4096];
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto complete = [&] {
    size_t pos = 0;
    for (int i = 0; i < count; ++i) {
      size_t end = data.find("\r\n\r\n", pos);
      if (end == std::string::npos) return false;
      size_t cl = data.find("Content-Length: ", pos);
      if (cl == std::string::npos || cl > end) return false;
      size_t len = std::stoul(data.substr(cl + 16));
      if (data.size() < end + 4 + len) return false;
      pos = end + 4 + len;
    }
    return true;
  };
  while (!complete()) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    until - std::chrono::steady_clock::now())
                                    .count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

}  // namespace

TEST_CASE("http server: keep-alive, deferred answers, limits and timeouts") {
  m3::net::HttpServerOptions options;
  options.port = 0;
  options.max_body_bytes = 1000;
  options.read_timeout = std::chrono::milliseconds(300);
  options.idle_timeout = std::chrono::milliseconds(300);
  m3::net::HttpServer server(options, [](m3::net::HttpRequest&& req, m3::net::Responder respond) {
    std::string body = std::string(req.target()) + ":" + req.body();
    // Answer from another thread, as the worker pool does.
    std::thread([respond, body] { respond(m3::net::JsonResponse(200, body)); }).detach();
  });
  server.Start();
  REQUIRE(server.port() > 0);

  int fd = Connect(server.port());
  std::string two =
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo";
  REQUIRE(::send(fd, two.data(), two.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(two.size()));
  std::string got = ReadResponses(fd, 2, 5000);
  CHECK(got.find("/a:one") != std::string::npos);
  CHECK(got.find("/b:two") != std::string::npos);
  CHECK(got.find("/a:one") < got.find("/b:two"));
  // An idle keep-alive connection is closed after the idle timeout.
  auto start = std::chrono::steady_clock::now();
  char c;
  pollfd p{fd, POLLIN, 0};
  CHECK(::poll(&p, 1, 5000) == 1);
  CHECK(::recv(fd, &c, 1, 0) == 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
  ::close(fd);

  auto big = m3::test::HttpCall(server.port(), "POST", "/x", std::string(5000, 'z'));
  CHECK(big.status == 413);
  CHECK(big.body.find("payload_too_large") != std::string::npos);
  int bad = Connect(server.port());
  std::string junk = "THIS IS NOT HTTP\r\n\r\n";
  ::send(bad, junk.data(), junk.size(), MSG_NOSIGNAL);
  CHECK(ReadResponses(bad, 1, 5000).find(" 400 ") != std::string::npos);
  ::close(bad);
  // The server still answers afterwards.
  CHECK(m3::test::HttpCall(server.port(), "GET", "/ok").status == 200);
  server.Stop(std::chrono::milliseconds(1000));
}
