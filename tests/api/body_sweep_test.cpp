// Hostile bodies against the real gateway, the CI share of scripts/body_sweep.py (which sends
// every shape near the 64 MiB limit to every JSON endpoint): a few of the costliest shapes at
// 16 MiB, sent whole, chunked and slowly, answered (200 or 4xx) within the bound (a gzip body:
// 415, bodies are not decoded); a client that leaves while its large body is being prepared
// stops costing the gateway CPU; a chunked body without a Content-Length is charged to the
// memory budget as it arrives.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Clock = std::chrono::steady_clock;

enum class Send { kWhole, kChunked, kSlow };

struct RawReply {
  int status = 0;  // 0: no answer before the deadline
  std::string text;
  double seconds = 0;  // from the first byte sent (kSlow: the last) to the answer's end
};

// One POST over a fresh connection (Connection: close), read to the close.
RawReply Post(uint16_t port, const std::string& target, const std::string& body, Send how,
              int timeout_ms = 30000) {
  RawReply reply;
  const int fd = ConnectLoopback(port);
  REQUIRE(fd >= 0);
  std::string head =
      "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  head += how == Send::kChunked ? "Transfer-Encoding: chunked\r\n"
                                : "Content-Length: " + std::to_string(body.size()) + "\r\n";
  head += "Connection: close\r\n\r\n";
  auto t0 = Clock::now();
  bool sent = SendAll(fd, head);
  if (how == Send::kChunked) {
    constexpr size_t kChunk = 1 << 20;
    for (size_t i = 0; sent && i < body.size(); i += kChunk) {
      const std::string piece = body.substr(i, kChunk);
      std::ostringstream size;
      size << std::hex << piece.size();
      sent = SendAll(fd, size.str() + "\r\n" + piece + "\r\n");
    }
    if (sent) SendAll(fd, "0\r\n\r\n");
  } else if (how == Send::kSlow) {
    // Ten pieces over ~1 s: well within the read timeout; the clock starts at the last.
    const size_t step = body.size() / 10 + 1;
    for (size_t i = 0; sent && i < body.size(); i += step) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      sent = SendAll(fd, body.substr(i, step));
    }
    t0 = Clock::now();
  } else {
    SendAll(fd, body);  // a refusal may close before the whole body is read
  }
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (ReceiveSome(fd, until, reply.text) == Received::kData) {
  }
  reply.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(fd);
  if (reply.text.rfind("HTTP/1.1 ", 0) == 0) reply.status = std::stoi(reply.text.substr(9, 3));
  return reply;
}

std::string Text(size_t n) {
  std::string s;
  s.reserve(n + 40);
  while (s.size() < n) s += "hello world, the quick brown fox jumps. ";
  s.resize(n);
  return s;
}

std::string Repeat(const std::string& item, size_t n) {
  std::string s;
  s.reserve(n + item.size());
  while (s.size() < n) s += (s.empty() ? "" : ",") + item;
  return s;
}

// The gateway process's CPU time so far (user + system), from /proc.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds the process spends until it has been idle for 300 ms (bounded by 20 s).
double CpuUntilIdle(pid_t pid, double from) {
  double last = CpuSeconds(pid);
  for (int i = 0; i < 66; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double now = CpuSeconds(pid);
    if (now - last < 0.02) break;
    last = now;
  }
  return CpuSeconds(pid) - from;
}

}  // namespace

TEST_CASE("hostile 16 MiB bodies on the JSON endpoints are answered within the bound") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e"});
  const uint16_t port = gateway.http_port();
  constexpr size_t kSize = 16u << 20;
  const std::string chat = R"({"model":"chat-e2e","max_tokens":1,"messages":[)";
  const std::string hi = R"({"role":"user","content":"Hi"}])";
  struct Case {
    const char* what;
    const char* target;
    std::string body;
    Send how = Send::kWhole;
  };
  const std::vector<Case> cases = {
      // nlohmann's lexer copied the whole token into its error: 1.5 s at 64 MiB.
      {"bad surrogate at a long string's end", "/v1/chat/completions",
       chat + hi + R"(,"x":")" + std::string(kSize, 'a') + R"(\ud800"})"},
      {"a 16M-digit number", "/v1/chat/completions",
       chat + hi + ",\"x\":" + std::string(kSize, '7') + "}"},
      {"truncated text", "/tokenize", R"({"model":"chat-e2e","prompt":")" + Text(kSize)},
      {"deep subtrees", "/v1/completions",
       R"({"model":"chat-e2e","prompt":"x","x":[)" +
           Repeat(std::string(60, '[') + "1" + std::string(60, ']'), kSize) + "]}"},
      {"many messages", "/v1/messages",
       R"({"model":"chat-e2e","max_tokens":1,"messages":[)" +
           Repeat(R"({"role":"user","content":"x"},{"role":"assistant","content":"y"})", kSize) +
           "]}"},
      {"long prompt (chat)", "/v1/chat/completions",
       chat + R"({"role":"user","content":")" + Text(kSize) + R"("}]})"},
      {"long prompt (messages)", "/v1/messages",
       chat + R"({"role":"user","content":")" + Text(kSize) + R"("}]})"},
      {"long prompt (tokenize)", "/tokenize",
       R"({"model":"chat-e2e","prompt":")" + Text(kSize) + R"("})"},
      {"long prompt, chunked", "/v1/completions",
       R"({"model":"chat-e2e","max_tokens":1,"prompt":")" + Text(kSize) + R"("})", Send::kChunked},
      {"1 MiB of escapes sent slowly", "/v1/chat/completions",
       chat + hi + R"(,"x":")" +
           [] {
             std::string s;
             while (s.size() < (1u << 20)) s += R"(\ud83d\ude00\n\u00e9)";
             return s;
           }() +
           "\"}",
       Send::kSlow},
  };
  for (const Case& c : cases) {
    const double cpu0 = CpuSeconds(gateway.pid());
    const RawReply r = Post(port, c.target, c.body, c.how);
    const double cpu = CpuSeconds(gateway.pid()) - cpu0;
    const std::string what = c.what;
    MESSAGE(what, " (", c.body.size(), " bytes): ", r.status, " in ", r.seconds, " s, ", cpu,
            " s of gateway CPU");
    CAPTURE(what);
    CAPTURE(r.text.substr(0, 400));
    CHECK(r.status >= 200);
    CHECK(r.status < 500);
    // The bound is 1.5 s at 64 MiB on a quiet dev machine (scripts/body_sweep.py); these are a
    // quarter of that size. The gateway's CPU time is the check, as CI's two cores are shared
    // (wall time there is mostly waiting for a core); the wall bound catches hangs.
    CHECK(cpu < 1.5);
    CHECK(r.seconds < 30.0);
  }
  // Bodies are not decoded: a gzip body is a 415 naming the coding, not "invalid JSON".
  const ApiReply gz = ApiCall(port, "POST", "/tokenize", R"({"model":"chat-e2e","prompt":"x"})",
                              {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}});
  CHECK(gz.status == 415);
  CHECK(gz.body.find("unsupported_content_encoding") != std::string::npos);
  CHECK(ApiCall(port, "POST", "/tokenize", R"({"model":"chat-e2e","prompt":"x"})",
                {{"Content-Encoding", "identity"}})
            .status == 200);
  CHECK(ApiCall(port, "POST", "/tokenize", R"({"model":"chat-e2e","prompt":"x"})").status == 200);
}

TEST_CASE("a client that leaves while its large body is prepared frees the gateway's CPU") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e"});
  const uint16_t port = gateway.http_port();
  // A 48 MiB prompt: parsed, then rendered and tokenized (~1 s of CPU) to a context error.
  const std::string body = R"({"model":"chat-e2e","max_tokens":1,"messages":[{"role":"user",)"
                           R"("content":")" +
                           Text(48u << 20) + R"("}]})";
  double start = CpuSeconds(gateway.pid());
  const RawReply answered = Post(port, "/v1/chat/completions", body, Send::kWhole);
  CHECK(answered.status == 400);
  const double full = CpuUntilIdle(gateway.pid(), start);

  start = CpuSeconds(gateway.pid());
  {
    const int fd = ConnectLoopback(port);
    REQUIRE(fd >= 0);
    REQUIRE(SendAll(fd,
                    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                    "application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body));
    ::close(fd);  // gone as soon as the body is out
  }
  const double left = CpuUntilIdle(gateway.pid(), start);
  MESSAGE("48 MiB prompt: ", full, " s of CPU answered, ", left, " s when the client left");
  // Reading the body and parsing up to the disconnect stay; rendering and tokenizing go.
  CHECK(left < full * 0.6);
  CHECK(ApiCall(port, "POST", "/tokenize", R"({"model":"chat-e2e","prompt":"x"})").status == 200);
}

TEST_CASE("a chunked body without Content-Length is charged to the budget as it arrives") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e",
                          "--max-inflight-bytes", "8000000"});
  const uint16_t port = gateway.http_port();
  const auto body = [](size_t n) {
    return R"({"model":"chat-e2e","prompt":"x","x":")" + std::string(n, 'a') + "\"}";
  };
  // 1 MB, charged 3x: within the 8 MB budget.
  RawReply r = Post(port, "/tokenize", body(1000000), Send::kChunked);
  CHECK(r.status == 200);
  // 4 MB: refused once its bytes so far, charged 3x, pass the budget (no length was declared).
  r = Post(port, "/tokenize", body(4000000), Send::kChunked);
  CAPTURE(r.text.substr(0, 300));
  CHECK(r.status == 429);
  CHECK(r.text.find("server_busy") != std::string::npos);
  // The refused body's charge is returned.
  r = Post(port, "/tokenize", body(1000000), Send::kChunked);
  CHECK(r.status == 200);
  const ApiReply metrics = ApiCall(port, "GET", "/metrics");
  CHECK(metrics.body.find(R"(m3_gateway_requests_total{endpoint="/tokenize",status="429"} 1)") !=
        std::string::npos);
}

}  // namespace m3::test
