// MediaFetcher end to end against loopback origins: allowlisted fetches, the SSRF guard on
// every hop, redirects, timeouts, size limits, and magic-byte format checks.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "gateway/net/base64.h"
#include "gateway/net/media_fetcher.h"
#include "shared/error.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

using m3::ErrorCode;
using m3::content::MediaKind;
using m3::net::FetchOptions;
using m3::net::MediaFetcher;
using m3::test::LoopbackOrigin;
using m3::test::ScriptedReply;

namespace {

const std::string& Png() {
  static std::string png = m3::test::ReadFile(m3::test::DataPath("m3-tiny/images/img00_53x37.png"));
  return png;
}
const std::string& Mkv() {
  static std::string mkv = m3::test::ReadFile(m3::test::DataPath("m3-tiny/video_ffv1.mkv"));
  return mkv;
}

ScriptedReply Redirect(const std::string& to) {
  return {302, {{"Location", to}}, "", 0, false, false};
}

// Serves /img.png, /video.mkv, /text, /empty, /big, /big-stream, /stall, /404, /500 and
// redirect chains /rN (N redirects before /img.png) and a loop /loopA <-> /loopB.
LoopbackOrigin MakeOrigin(std::string* self_url) {
  return LoopbackOrigin([self_url](const std::string& path) -> ScriptedReply {
    if (path == "/img.png") return {200, {{"Content-Type", "text/html"}}, Png()};
    if (path == "/video.mkv") return {200, {}, Mkv()};
    if (path == "/text") return {200, {{"Content-Type", "image/png"}}, "hello, not an image"};
    if (path == "/empty") return {200, {}, ""};
    if (path == "/big") return {200, {}, std::string(3 << 20, 'x')};
    if (path == "/big-stream") {
      ScriptedReply r{200, {}, Png() + std::string(3 << 20, 'x')};
      r.omit_content_length = true;
      return r;
    }
    if (path == "/stall") {
      ScriptedReply r;
      r.never_answer = true;
      return r;
    }
    if (path == "/404") return {404, {}, "nope"};
    if (path == "/500") return {500, {}, "oops"};
    if (path.rfind("/r", 0) == 0 && path.size() > 2) {
      int n = std::stoi(path.substr(2));
      return Redirect(n <= 1 ? "/img.png" : "/r" + std::to_string(n - 1));
    }
    if (path == "/loopA") return Redirect("/loopB");
    if (path == "/loopB") return Redirect(*self_url + "/loopA");
    if (path == "/to-metadata") return Redirect("http://169.254.169.254/latest/meta-data/");
    if (path == "/to-private") return Redirect("http://10.0.0.1/x.png");
    if (path == "/to-v6-loopback") return Redirect("http://[::1]:1/x.png");
    if (path == "/to-localhost")
      return Redirect("http://localhost" + self_url->substr(self_url->rfind(':')) + "/img.png");
    return {404, {}, ""};
  });
}

ErrorCode CodeOf(const MediaFetcher& f, const std::string& url, MediaKind kind = MediaKind::kImage,
                 std::string* message = nullptr) {
  try {
    f.Fetch(url, kind, nullptr);
  } catch (const m3::Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  FAIL("expected an error for " << url);
  return ErrorCode::kInternal;
}

FetchOptions Allowing(uint16_t port) {
  FetchOptions o;
  o.allowed_hosts = {"127.0.0.1:" + std::to_string(port)};
  o.total_timeout = std::chrono::milliseconds(5000);
  o.max_image_bytes = 1 << 20;
  return o;
}

uint16_t ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("allowlisted loopback origins serve images and videos, sniffed by their bytes") {
  std::string self;
  auto origin = MakeOrigin(&self);
  self = origin.Url("");
  MediaFetcher fetcher(Allowing(origin.port()));
  auto img = fetcher.Fetch(origin.Url("/img.png"), MediaKind::kImage, nullptr);
  CHECK(img.bytes == Png());
  CHECK(img.format.name == "png");
  FetchOptions big = Allowing(origin.port());
  big.max_video_bytes = 8 << 20;
  auto vid = MediaFetcher(big).Fetch(origin.Url("/video.mkv"), MediaKind::kVideo, nullptr);
  CHECK(vid.bytes == Mkv());
  CHECK(vid.format.name == "matroska");
  CHECK(fetcher.Fetch(origin.Url("/r3"), MediaKind::kImage, nullptr).bytes == Png());
}

TEST_CASE("the SSRF guard refuses loopback and internal addresses, on every redirect too") {
  std::string self;
  auto origin = MakeOrigin(&self);
  self = origin.Url("");
  MediaFetcher guarded(FetchOptions{});
  int before = origin.requests();
  std::string message;
  CHECK(CodeOf(guarded, origin.Url("/img.png"), MediaKind::kImage, &message) ==
        ErrorCode::kPermissionDenied);
  CHECK(message.find("loopback") != std::string::npos);
  CHECK(origin.requests() == before);  // refused before connecting
  for (const char* url :
       {"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/x.png", "http://[::1]/x.png",
        "http://0.0.0.0/x.png", "http://[::ffff:127.0.0.1]/x", "http://224.0.0.1/x",
        "http://[fc00::1]/x", "http://100.64.0.1/x", "https://192.168.0.1/x", "http://localhost/x",
        // Legacy numeric spellings resolve to loopback; the guard checks the
        // resolved addresses, not the host text.
        "http://127.1/x", "http://2130706433/x", "http://0x7f000001/x"}) {
    CAPTURE(url);
    CHECK(CodeOf(guarded, url) == ErrorCode::kPermissionDenied);
  }
  MediaFetcher fetcher(Allowing(origin.port()));
  CHECK(CodeOf(fetcher, origin.Url("/to-metadata")) == ErrorCode::kPermissionDenied);
  CHECK(CodeOf(fetcher, origin.Url("/to-private")) == ErrorCode::kPermissionDenied);
  CHECK(CodeOf(fetcher, origin.Url("/to-v6-loopback")) == ErrorCode::kPermissionDenied);
  CHECK(CodeOf(fetcher, origin.Url("/to-localhost")) == ErrorCode::kPermissionDenied);
}

TEST_CASE("redirect loops and long chains are errors") {
  std::string self;
  auto origin = MakeOrigin(&self);
  self = origin.Url("");
  MediaFetcher fetcher(Allowing(origin.port()));
  std::string message;
  CHECK(CodeOf(fetcher, origin.Url("/loopA"), MediaKind::kImage, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK(message.find("redirect loop") != std::string::npos);
  CHECK(CodeOf(fetcher, origin.Url("/r4"), MediaKind::kImage, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK(message.find("too many redirects") != std::string::npos);
}

TEST_CASE("a server that never answers times out quickly") {
  std::string self;
  auto origin = MakeOrigin(&self);
  FetchOptions o = Allowing(origin.port());
  o.total_timeout = std::chrono::milliseconds(300);
  MediaFetcher fetcher(o);
  auto start = std::chrono::steady_clock::now();
  std::string message;
  CHECK(CodeOf(fetcher, origin.Url("/stall"), MediaKind::kImage, &message) ==
        ErrorCode::kDeadlineExceeded);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(message.find("timed out") != std::string::npos);
}

TEST_CASE("size limits, status codes, empty and wrong bodies") {
  std::string self;
  auto origin = MakeOrigin(&self);
  MediaFetcher fetcher(Allowing(origin.port()));
  CHECK(CodeOf(fetcher, origin.Url("/big")) == ErrorCode::kTooLarge);
  CHECK(CodeOf(fetcher, origin.Url("/big-stream")) == ErrorCode::kTooLarge);
  CHECK(CodeOf(fetcher, origin.Url("/text")) == ErrorCode::kUnsupported);
  CHECK(CodeOf(fetcher, origin.Url("/empty")) == ErrorCode::kInvalidArgument);
  CHECK(CodeOf(fetcher, origin.Url("/404")) == ErrorCode::kInvalidArgument);
  CHECK(CodeOf(fetcher, origin.Url("/500")) == ErrorCode::kUnavailable);
  CHECK(CodeOf(fetcher, origin.Url("/img.png"), MediaKind::kVideo) == ErrorCode::kUnsupported);
  FetchOptions o = Allowing(origin.port());
  o.max_video_bytes = 8 << 20;
  CHECK(CodeOf(MediaFetcher(o), origin.Url("/video.mkv"), MediaKind::kImage) ==
        ErrorCode::kUnsupported);
  uint16_t closed = ClosedPort();
  FetchOptions c;
  c.allowed_hosts = {"127.0.0.1"};
  CHECK(CodeOf(MediaFetcher(c), "http://127.0.0.1:" + std::to_string(closed) + "/x") ==
        ErrorCode::kUnavailable);
  CHECK(CodeOf(fetcher, "ftp://example.com/x.png") == ErrorCode::kInvalidArgument);
  CHECK(CodeOf(fetcher, "example.com/x.png") == ErrorCode::kInvalidArgument);
}

TEST_CASE("the per-request byte budget spans items") {
  std::string self;
  auto origin = MakeOrigin(&self);
  FetchOptions o = Allowing(origin.port());
  o.max_request_bytes = static_cast<int64_t>(Png().size()) + 100;
  MediaFetcher fetcher(o);
  m3::net::ByteBudget budget(o.max_request_bytes);
  fetcher.Fetch(origin.Url("/img.png"), MediaKind::kImage, &budget);
  CHECK_THROWS_AS(fetcher.Fetch(origin.Url("/img.png"), MediaKind::kImage, &budget), m3::Error);
}

TEST_CASE("data: URIs go through the same checks") {
  MediaFetcher fetcher(FetchOptions{});
  auto ok = fetcher.Fetch("data:image/png;base64," + m3::net::Base64Encode(Png()),
                          MediaKind::kImage, nullptr);
  CHECK(ok.bytes == Png());
  CHECK(CodeOf(fetcher, "data:image/png;base64,!!!!") == ErrorCode::kInvalidArgument);
  CHECK(CodeOf(fetcher, "data:image/png;base64,") == ErrorCode::kInvalidArgument);
  CHECK(CodeOf(fetcher, "data:image/png;base64," + m3::net::Base64Encode("GIF8 not really")) ==
        ErrorCode::kUnsupported);
  CHECK(CodeOf(fetcher, m3::test::DataPath("m3-tiny/images/img00_53x37.png")) ==
        ErrorCode::kPermissionDenied);
}
