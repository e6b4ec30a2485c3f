// HEAD over a real socket (RFC 9110 9.3.2): the server, not each handler, sends the head a GET
// would get (Content-Length included) and no body bytes; a streamed answer stops at its head and
// its handler's writes fail; the connection then serves the next keep-alive request. The bytes
// are checked as a client sees them: a HEAD response followed at once by the next response.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "gateway/net/http_server.h"
#include "tests/net/loopback_http.h"

namespace {

namespace http = boost::beast::http;
using m3::net::HttpExchange;
using m3::net::HttpRequest;
using m3::net::HttpResponse;
using m3::net::HttpServer;
using m3::net::HttpServerOptions;
using Clock = std::chrono::steady_clock;

constexpr int kWaitMs = 5000;  // the bound of every wait; none is expected to come close

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A raw client connection: what the server sent, byte for byte.
class Conn {
 public:
  explicit Conn(uint16_t port) : fd_(m3::test::ConnectLoopback(port)) { REQUIRE(fd_ >= 0); }
  ~Conn() { ::close(fd_); }

  void Send(const std::string& data) { REQUIRE(m3::test::SendAll(fd_, data)); }

  // Reads until `in()` holds at least `size` bytes, the server closes, or the wait ends.
  bool Fill(size_t size, int wait_ms = kWaitMs) {
    const auto until = Clock::now() + std::chrono::milliseconds(wait_ms);
    while (in_.size() < size && !eof_) {
      const m3::test::Received r = m3::test::ReceiveSome(fd_, until, in_);
      if (r == m3::test::Received::kTimedOut) return false;
      if (r == m3::test::Received::kClosed) eof_ = true;
    }
    return in_.size() >= size;
  }

  // Reads until `marker` occurs at or after `from`; its position, or npos.
  size_t FillUntil(const std::string& marker, size_t from) {
    while (in_.find(marker, from) == std::string::npos) {
      if (!Fill(in_.size() + 1)) return std::string::npos;
    }
    return in_.find(marker, from);
  }

  const std::string& in() const { return in_; }
  bool eof() const { return eof_; }

 private:
  int fd_;
  std::string in_;
  bool eof_ = false;
};

struct Head {
  int status = 0;
  std::map<std::string, std::string> fields;  // lower-case names
  size_t end = 0;                             // the offset just past the head's empty line
};

// The response head that starts at `at` (its status line must be there).
Head ReadHead(Conn& c, size_t at) {
  Head h;
  const size_t blank = c.FillUntil("\r\n\r\n", at);
  REQUIRE(blank != std::string::npos);
  const std::string text = c.in().substr(at, blank - at);
  REQUIRE(text.rfind("HTTP/1.", 0) == 0);  // a response starts here, not body bytes
  h.status = std::stoi(text.substr(9, 3));
  size_t line = text.find("\r\n");
  while (line != std::string::npos) {
    const size_t next = text.find("\r\n", line + 2);
    const std::string field =
        text.substr(line + 2, next == std::string::npos ? next : next - line - 2);
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      std::string value = field.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      h.fields[Lower(field.substr(0, colon))] = value;
    }
    line = next;
  }
  h.end = blank + 4;
  return h;
}

constexpr std::string_view kBody = R"({"models": ["a", "b", "c"]})";
constexpr std::string_view kRefusal = R"({"error": "no such thing"})";

// "/whole": one response through a Responder; "/sse": a stream of three events. Records what
// the handlers saw.
struct HeadServer {
  std::atomic<int> head_requests{0};
  std::atomic<int> failed_writes{0};
  std::atomic<int> streams_done{0};
  HttpServer server;

  static HttpServerOptions Options() {
    HttpServerOptions o;
    o.threads = 2;
    return o;
  }

  HeadServer()
      : server(Options(),
               m3::net::ExchangeHandler(
                   [this](HttpRequest&& req, std::shared_ptr<HttpExchange> exchange) {
                     if (req.method() == http::verb::head) head_requests.fetch_add(1);
                     if (req.target() == "/sse") {
                       std::thread([this, exchange] {
                         HttpResponse head{http::status::ok, 11};
                         head.set(http::field::content_type, "text/event-stream");
                         exchange->StartStream(std::move(head));
                         for (int i = 0; i < 3; ++i) {
                           if (!exchange->Write("data: " + std::to_string(i) + "\n\n")) {
                             failed_writes.fetch_add(1);
                           }
                         }
                         exchange->EndStream();
                         streams_done.fetch_add(1);
                       }).detach();
                       return;
                     }
                     exchange->Respond(m3::net::JsonResponse(200, std::string(kBody)));
                   }),
               [](const HttpRequest& header) -> std::optional<HttpResponse> {
                 if (header.target() == "/refused") {
                   return m3::net::JsonResponse(404, std::string(kRefusal));
                 }
                 return std::nullopt;
               }) {
    server.Start();
  }
};

std::string Request(const std::string& method, const std::string& target) {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

bool WaitFor(const std::atomic<int>& n, int want) {
  const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (n.load() < want && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return n.load() >= want;
}

}  // namespace

TEST_CASE("HEAD: a whole response's head with its Content-Length, no body; keep-alive goes on") {
  HeadServer s;
  Conn c(s.server.port());
  // Sent together: the GET's response must begin right where the HEAD's head ends.
  c.Send(Request("HEAD", "/whole") + Request("GET", "/whole"));
  Head head = ReadHead(c, 0);
  CHECK(head.status == 200);
  CHECK(head.fields["content-length"] == std::to_string(kBody.size()));
  CHECK(head.fields["content-type"] == "application/json");
  Head get = ReadHead(c, head.end);
  CHECK(get.status == 200);
  CHECK(get.fields["content-length"] == std::to_string(kBody.size()));
  REQUIRE(c.Fill(get.end + kBody.size()));
  CHECK(c.in().substr(get.end) == kBody);
  CHECK(s.head_requests.load() == 1);

  // One at a time: nothing follows a HEAD response, and the connection still serves.
  c.Send(Request("HEAD", "/whole"));
  Head again = ReadHead(c, get.end + kBody.size());
  CHECK(again.status == 200);
  CHECK(!c.Fill(again.end + 1, 300));  // no body byte arrives
  CHECK(!c.eof());
  c.Send(Request("GET", "/whole"));
  Head last = ReadHead(c, again.end);
  REQUIRE(c.Fill(last.end + kBody.size()));
  CHECK(c.in().substr(last.end) == kBody);
}

TEST_CASE("HEAD: a streamed answer stops at its head; the handler's writes fail") {
  HeadServer s;
  Conn c(s.server.port());
  c.Send(Request("HEAD", "/sse") + Request("GET", "/whole"));
  Head head = ReadHead(c, 0);
  CHECK(head.status == 200);
  CHECK(Lower(head.fields["transfer-encoding"]) == "chunked");
  CHECK(head.fields["content-type"] == "text/event-stream");
  // No chunk (not even the last one) before the next response.
  Head next = ReadHead(c, head.end);
  CHECK(next.status == 200);
  REQUIRE(c.Fill(next.end + kBody.size()));
  CHECK(c.in().substr(next.end) == kBody);
  REQUIRE(WaitFor(s.streams_done, 1));
  CHECK(s.failed_writes.load() == 3);

  // The same endpoint by GET on the same connection streams in full.
  const size_t at = next.end + kBody.size();
  c.Send(Request("GET", "/sse"));
  Head stream = ReadHead(c, at);
  CHECK(Lower(stream.fields["transfer-encoding"]) == "chunked");
  REQUIRE(c.FillUntil("0\r\n\r\n", stream.end) != std::string::npos);
  CHECK(c.in().find("data: 2", stream.end) != std::string::npos);
  REQUIRE(WaitFor(s.streams_done, 2));
  CHECK(s.failed_writes.load() == 3);
  CHECK(!c.eof());
}

TEST_CASE("HEAD: a refusal from the header check carries no body either") {
  HeadServer s;
  Conn c(s.server.port());
  c.Send(Request("HEAD", "/refused"));
  Head head = ReadHead(c, 0);
  CHECK(head.status == 404);
  CHECK(head.fields["content-length"] == std::to_string(kRefusal.size()));
  // A refusal closes the connection; no body byte comes before the close.
  c.Fill(head.end + 1);
  CHECK(c.eof());
  CHECK(c.in().size() == head.end);
}
