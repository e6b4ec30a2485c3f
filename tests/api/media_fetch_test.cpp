// Chat media fetched through `m3-gateway serve`: slow http items wait on the shared fetch
// context, not on fetch-pool threads (one fetch thread, four items each answered after 400 ms,
// all done in well under 4 x 400 ms), and a media URL whose host cannot be reached is the
// client's error (400 naming the item and the cause) on chat and /v1/preprocess alike; a client
// that leaves while its media are fetched gets none of them decoded.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kItems = 4;
constexpr int kDelayMs = 400;

Json ImageMessages(const std::vector<std::string>& urls) {
  Json content = Json::array();
  for (const std::string& url : urls) {
    content.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
  }
  content.push_back({{"type", "text"}, {"text", "What are these?"}});
  return Json::array({{{"role", "user"}, {"content", content}}});
}

}  // namespace

TEST_CASE(
    "chat media: slow items hold no fetch threads; unreachable hosts are a 400; leaving ends it") {
  const std::string folder = DataPath("chat-e2e");
  const std::string png = ReadFile(folder + "/images/red_square.png");
  ServerProcess engine("chat-e2e/model");
  std::atomic<int> left_requests{0};  // of the client that leaves, below
  LoopbackOrigin origin([&](const std::string& path) {
    if (path.rfind("/left", 0) == 0) left_requests.fetch_add(1);
    ScriptedReply reply;
    reply.headers = {{"Content-Type", "image/png"}};
    reply.body = png;
    reply.delay_ms = kDelayMs;
    return reply;
  });
  GatewayProcess gateway({"serve", "--model", folder + "/model", "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e", "--allow-media-host",
                          "127.0.0.1:" + std::to_string(origin.port()), "--allow-media-host",
                          "127.0.0.1:1", "--fetch-threads", "1", "--workers", "2",
                          "--fetch-timeout-ms", "5000"});
  const uint16_t port = gateway.http_port();

  // One image alone: what a single item costs here (delay, decode, prompt).
  auto tokenize = [&](int n) {
    std::vector<std::string> urls;
    for (int i = 0; i < n; ++i) urls.push_back(origin.Url("/img" + std::to_string(i) + ".png"));
    const auto start = Clock::now();
    const ApiReply r =
        PostJson(port, "/tokenize", {{"model", "chat-e2e"}, {"messages", ImageMessages(urls)}});
    const auto took = Clock::now() - start;
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return std::make_pair(Json::parse(r.body)["count"].get<int64_t>(), took);
  };
  const auto [one_count, one_took] = tokenize(1);
  const int before = origin.requests();
  const auto [four_count, four_took] = tokenize(kItems);
  CHECK(origin.requests() - before == kItems);
  CHECK(four_count > one_count);
  MESSAGE("one item ", std::chrono::duration_cast<std::chrono::milliseconds>(one_took).count(),
          " ms; ", kItems, " items ",
          std::chrono::duration_cast<std::chrono::milliseconds>(four_took).count(), " ms");
  // With a fetch thread per item they would take kItems x kDelayMs; waiting at once, about one.
  CHECK(four_took < std::chrono::milliseconds(kItems * kDelayMs * 6 / 10));

  // Nothing listens on 127.0.0.1:1 (allowlisted): the client's URL cannot be fetched.
  const std::string unreachable = "http://127.0.0.1:1/a.png";
  const ApiReply chat = PostJson(
      port, "/v1/chat/completions",
      {{"model", "chat-e2e"}, {"messages", ImageMessages({unreachable})}, {"max_tokens", 2}});
  const ApiReply pre = PostJson(port, "/v1/preprocess",
                                {{"messages", ImageMessages({origin.Url("/a.png"), unreachable})}});
  for (const ApiReply* r : {&chat, &pre}) {
    CAPTURE(r->body);
    CHECK(r->status == 400);
    const Json body = Json::parse(r->body, nullptr, false);
    REQUIRE(body.is_object());
    const Json& e = body["error"];
    CHECK(e["type"] == "invalid_request_error");
    CHECK(e["code"] == "media_fetch_failed");
    const std::string param = e["param"].get<std::string>();
    CHECK(param.find(r == &chat ? "content[0].image_url.url" : "content[1].image_url.url") !=
          std::string::npos);
    const std::string message = e["message"].get<std::string>();
    CHECK(message.find(param) != std::string::npos);
    CHECK(message.find("127.0.0.1:1") != std::string::npos);
    CHECK(message.find("connecting") != std::string::npos);
  }
  // A client that leaves while its media are fetched: nothing more is done for it. Its two
  // items arrive after 400 ms, long after the disconnect; neither is decoded.
  auto scrape = [&](const std::string& series) {
    const ApiReply m = ApiCall(port, "GET", "/metrics");
    REQUIRE(m.status == 200);
    const size_t at = m.body.find("\n" + series + " ");
    if (at == std::string::npos) return 0.0;
    return std::stod(m.body.substr(at + series.size() + 2));
  };
  const std::string decoded = "m3_gateway_preprocess_seconds_count{modality=\"image\"}";
  const std::string gone =
      "m3_gateway_requests_total{endpoint=\"/v1/chat/completions\",status=\"499\"}";
  const double decoded_before = scrape(decoded);
  CHECK(decoded_before >= kItems + 1);  // the /tokenize items above
  {
    const std::string body =
        Json({{"model", "chat-e2e"},
              {"messages", ImageMessages({origin.Url("/left0.png"), origin.Url("/left1.png")})},
              {"max_tokens", 2}})
            .dump();
    const int fd = ConnectLoopback(port);
    REQUIRE(fd >= 0);
    const std::string request =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
    const auto sent = Clock::now();
    while (left_requests.load() < 2 && Clock::now() - sent < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::close(fd);
  }
  // The request ends (counted as 499 once every item's work is over).
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (scrape(gone) < 1 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(scrape(gone) == 1);
  CHECK(scrape(decoded) == decoded_before);

  // The server is still there.
  CHECK(ApiCall(port, "GET", "/health").status == 200);
}

}  // namespace m3::test
