// Engine faults through the real processes: two engines behind one gateway (health probes
// every 100 ms). An engine killed while it streams ends that client's stream with an error
// event within a second; new requests go to the other engine; the killed engine, started
// again on its port, is re-admitted and serves again. An engine killed under eight whole
// answers loses none of them (retried on the other engine); streams still running when the
// gateway's shutdown grace period ends get an error event and [DONE].
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Json Engines(uint16_t port) {
  const ApiReply r = ApiCall(port, "GET", "/ready");
  const Json j = Json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("engines") ? j["engines"] : Json::array();
}

// Waits (bounded) until /ready lists `address` in `state`.
bool WaitForState(uint16_t port, const std::string& address, const std::string& state) {
  for (int i = 0; i < 150; ++i) {
    for (const Json& e : Engines(port)) {
      if (e["address"] == address && e["state"] == state) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST_CASE("an engine killed mid-stream: error event within 1 s, failover, re-admission") {
  auto a = std::make_unique<ServerProcess>("chat-e2e/model");
  ServerProcess b("chat-e2e/model");
  const int a_port = a->port();
  const std::string a_address = a->address();
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          a_address, "--engine", b.address(), "--served-model-name", "chat-e2e",
                          "--health-interval-ms", "100", "--engine-probe-timeout-ms", "500",
                          "--ready-details"});
  const uint16_t port = gateway.http_port();
  REQUIRE(WaitForState(port, a_address, "healthy"));
  REQUIRE(WaitForState(port, b.address(), "healthy"));

  // A long stream on engine A (both idle: the first listed takes it).
  const Json body = {{"model", "chat-e2e"},
                     {"messages", {{{"role", "user"}, {"content", "Count slowly to a thousand."}}}},
                     {"max_tokens", 1500},
                     {"ignore_eos", true},
                     {"temperature", 0},
                     {"stream", true}};
  std::atomic<bool> killed{false};
  Clock::time_point killed_at{};
  Clock::time_point error_at{};
  std::string seen;
  const ApiReply r =
      ApiCall(port, "POST", "/v1/chat/completions", body.dump(),
              {{"Content-Type", "application/json"}}, 60000, [&](std::string_view piece) {
                seen.append(piece);
                if (!killed && seen.find("\"content\"") != std::string::npos) {
                  killed_at = Clock::now();  // before the kill: SIGKILL and reaping included
                  a->Kill();
                  killed = true;
                }
                if (killed && error_at == Clock::time_point{} &&
                    seen.find("\"error\"") != std::string::npos) {
                  error_at = Clock::now();
                }
              });
  REQUIRE(killed);
  CHECK(r.status == 200);
  CHECK(r.complete);
  const StreamSummary s = ReadSse(r.body);
  CHECK(s.done);
  REQUIRE(s.errors.size() == 1);
  CHECK(s.errors[0]["error"]["message"].is_string());
  REQUIRE(error_at != Clock::time_point{});
  const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(error_at - killed_at);
  MESSAGE("the error event came ", after.count(), " ms after the engine was killed");
  CHECK(after.count() < 1000);

  // New requests are served by B, also before A's ejection is noticed (retried elsewhere).
  const Json short_body = {{"model", "chat-e2e"},
                           {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                           {"max_tokens", 4},
                           {"temperature", 0}};
  for (int i = 0; i < 3; ++i) {
    const ApiReply ok = PostJson(port, "/v1/chat/completions", short_body);
    CHECK_MESSAGE(ok.status == 200, ok.body);
  }
  CHECK(WaitForState(port, a_address, "unhealthy"));

  // A comes back on its port: re-admitted, and takes requests again.
  a = std::make_unique<ServerProcess>("chat-e2e/model", std::vector<std::string>{}, a_port);
  CHECK(WaitForState(port, a_address, "healthy"));
  b.Kill();
  CHECK(WaitForState(port, b.address(), "unhealthy"));
  const ApiReply again = PostJson(port, "/v1/chat/completions", short_body);
  CHECK_MESSAGE(again.status == 200, again.body);
}

// Requests the engine is running now (its own Health), -1 when it does not answer.
int Running(const ServerProcess& engine) {
  auto stub = engine.Stub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  engine::v1::HealthResponse health;
  if (!stub->Health(&context, engine::v1::HealthRequest(), &health).ok()) return -1;
  return static_cast<int>(health.running_requests());
}

TEST_CASE("an engine killed under 8 concurrent whole answers: all 8 answered 200, in full") {
  auto a = std::make_unique<ServerProcess>("chat-e2e/model");
  ServerProcess b("chat-e2e/model");
  const std::string a_address = a->address();
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          a_address, "--engine", b.address(), "--served-model-name", "chat-e2e",
                          "--health-interval-ms", "100", "--engine-probe-timeout-ms", "500",
                          "--ready-details"});
  const uint16_t port = gateway.http_port();
  REQUIRE(WaitForState(port, a_address, "healthy"));
  REQUIRE(WaitForState(port, b.address(), "healthy"));

  const int kTokens = 600;
  const Json body = {{"model", "chat-e2e"},
                     {"messages", {{{"role", "user"}, {"content", "Count slowly to a thousand."}}}},
                     {"max_tokens", kTokens},
                     {"ignore_eos", true},
                     {"temperature", 0}};
  std::vector<ApiReply> replies(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back(
        [&, i] { replies[i] = PostJson(port, "/v1/chat/completions", body, {}, 300000); });
  }
  // Least-load spreads them over both engines; A dies while it is generating its share.
  bool running = false;
  for (int i = 0; i < 500 && !running; ++i) {
    running = Running(*a) > 0;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(running);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // tokens have come back
  const int on_a = Running(*a);
  a->Kill();
  for (auto& t : clients) t.join();
  MESSAGE(on_a, " requests were running on the killed engine");
  CHECK(on_a > 0);
  std::string first;
  for (const ApiReply& r : replies) {
    CHECK_MESSAGE(r.status == 200, r.body);
    if (r.status != 200) continue;
    const Json j = Json::parse(r.body);
    CHECK(j["usage"]["completion_tokens"] == kTokens);
    // Greedy, one prompt: a retried answer is the whole answer again, not the dead one's tail.
    const Json& m = j["choices"][0]["message"];
    const std::string text = m.value("reasoning_content", std::string()) +
                             (m["content"].is_string() ? m["content"].get<std::string>() : "");
    if (first.empty()) first = text;
    CHECK(text == first);
  }
  CHECK(WaitForState(port, a_address, "unhealthy"));
}

TEST_CASE("streams still running at the end of the shutdown grace period: error event, [DONE]") {
  ServerProcess engine("chat-e2e/model");
  auto gateway = std::make_unique<GatewayProcess>(std::vector<std::string>{
      "serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine", engine.address(),
      "--served-model-name", "chat-e2e", "--shutdown-grace-ms", "300"});
  const uint16_t port = gateway->http_port();
  const Json body = {{"model", "chat-e2e"},
                     {"messages", {{{"role", "user"}, {"content", "Count slowly to a thousand."}}}},
                     {"max_tokens", 3000},
                     {"ignore_eos", true},
                     {"temperature", 0},
                     {"stream", true}};
  const StoppedStream stopped = StreamThenStop(port, "/v1/chat/completions", body.dump(),
                                               "\"content\"", [&] { return gateway->Terminate(); });
  REQUIRE(stopped.started);
  CHECK(stopped.exit_status == 0);
  const ApiReply& r = stopped.reply;
  CHECK(r.status == 200);
  CHECK(r.complete);  // the chunked body ended properly: not a bare close
  const StreamSummary s = ReadSse(r.body);
  CHECK(s.well_formed);
  CHECK(s.done);
  REQUIRE(s.errors.size() == 1);
  CHECK(s.errors[0]["error"]["code"] == "server_shutting_down");
}

}  // namespace
}  // namespace m3::test
