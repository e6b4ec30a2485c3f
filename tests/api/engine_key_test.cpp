// The gateway in front of engines that need a key (m3-engine serve --api-key): with
// --engine-api-key (or M3_ENGINE_API_KEY) it serves end to end, without it the engines are
// never admitted; /ready shows addresses and errors only to callers with the gateway's API key
// or behind --ready-details; the bearer scheme in any case; /v1/completions' context-length
// errors name "prompt".
#include <doctest/doctest.h>
#include <stdlib.h>

#include <thread>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

const Json kChat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}};

std::vector<std::string> GatewayArgs(const ServerProcess& engine,
                                     const std::vector<std::string>& more) {
  std::vector<std::string> args = {
      "serve",    "--model",        DataPath("chat-e2e/model"), "--port",   "0",
      "--engine", engine.address(), "--served-model-name",      "chat-e2e", "--health-interval-ms",
      "100"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Waits (bounded) for /ready to answer `status`.
ApiReply WaitReady(uint16_t port, int status, const Headers& headers = {}) {
  ApiReply r;
  for (int i = 0; i < 100; ++i) {
    r = ApiCall(port, "GET", "/ready", "", headers);
    if (r.status == status) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return r;
}

TEST_CASE(
    "engines with a key: the gateway with --engine-api-key serves, without it none is admitted") {
  ServerProcess engine("chat-e2e/model", {"--api-key", "engine-k3y"});
  {
    GatewayProcess gateway(GatewayArgs(engine, {"--engine-api-key", "engine-k3y"}));
    const uint16_t port = gateway.http_port();
    REQUIRE(WaitReady(port, 200).status == 200);
    const ApiReply r = PostJson(port, "/v1/chat/completions", kChat);
    CHECK(r.status == 200);
    CHECK(Json::parse(r.body)["usage"]["completion_tokens"].get<int>() > 0);
  }
  {
    // The key from the environment, as docker/ passes it.
    setenv("M3_ENGINE_API_KEY", "engine-k3y", 1);
    GatewayProcess gateway(GatewayArgs(engine, {}));
    unsetenv("M3_ENGINE_API_KEY");
    const uint16_t port = gateway.http_port();
    REQUIRE(WaitReady(port, 200).status == 200);
    CHECK(PostJson(port, "/v1/chat/completions", kChat).status == 200);
  }
  for (const std::vector<std::string>& key :
       std::vector<std::vector<std::string>>{{}, {"--engine-api-key", "wrong"}}) {
    GatewayProcess gateway(GatewayArgs(engine, key));
    const uint16_t port = gateway.http_port();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a few probes
    const ApiReply ready = ApiCall(port, "GET", "/ready");
    CHECK(ready.status == 503);
    // Neither the address nor the engine's error text to an anonymous caller.
    CHECK(ready.body.find(engine.address()) == std::string::npos);
    CHECK(ready.body.find("API key") == std::string::npos);
    CHECK(ready.body.find("0 of 1 engines healthy") != std::string::npos);
    CHECK(PostJson(port, "/v1/chat/completions", kChat).status == 503);
  }
  {
    // --ready-details: the refusal's reason is shown.
    GatewayProcess gateway(GatewayArgs(engine, {"--ready-details"}));
    const ApiReply ready = WaitReady(gateway.http_port(), 503);
    CHECK(ready.body.find(engine.address()) != std::string::npos);
    CHECK(ready.body.find("API key") != std::string::npos);
  }
}

TEST_CASE("/ready details only with the API key; bearer in any case; completions blame prompt") {
  ServerProcess engine("chat-e2e/model");
  {
    GatewayProcess gateway(GatewayArgs(engine, {}));
    const ApiReply r = WaitReady(gateway.http_port(), 200);
    REQUIRE(r.status == 200);
    const Json j = Json::parse(r.body);
    CHECK(j["healthy_engines"] == 1);
    CHECK(j["total_engines"] == 1);
    CHECK(j["engines"][0]["state"] == "healthy");
    CHECK(j["engines"][0]["healthy"] == true);
    CHECK_FALSE(j["engines"][0].contains("address"));
    CHECK(r.body.find(engine.address()) == std::string::npos);
  }
  GatewayProcess gateway(GatewayArgs(engine, {"--api-key", "gw-key"}));
  const uint16_t port = gateway.http_port();
  ApiReply r = WaitReady(port, 200);
  REQUIRE(r.status == 200);
  CHECK(r.body.find(engine.address()) == std::string::npos);
  CHECK(ApiCall(port, "GET", "/ready", "", {{"Authorization", "Bearer nope"}})
            .body.find(engine.address()) == std::string::npos);
  r = ApiCall(port, "GET", "/ready", "", {{"Authorization", "Bearer gw-key"}});
  CHECK(Json::parse(r.body)["engines"][0]["address"] == engine.address());
  // The index /metrics labels the engine with (its address is for key holders only).
  CHECK(Json::parse(r.body)["engines"][0]["engine"] == "0");
  const ApiReply metrics = ApiCall(port, "GET", "/metrics");
  CHECK(metrics.body.find("m3_gateway_engine_healthy{engine=\"0\"} 1") != std::string::npos);
  CHECK(metrics.body.find(engine.address()) == std::string::npos);
  r = ApiCall(port, "GET", "/ready", "", {{"x-api-key", "gw-key"}});
  CHECK(Json::parse(r.body)["engines"][0]["address"] == engine.address());

  // RFC 9110: the scheme is case-insensitive; the key is not.
  for (const char* scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
    CAPTURE(scheme);
    CHECK(
        ApiCall(port, "GET", "/v1/models", "", {{"Authorization", std::string(scheme) + " gw-key"}})
            .status == 200);
  }
  CHECK(ApiCall(port, "GET", "/v1/models", "", {{"Authorization", "bearer GW-KEY"}}).status == 401);
  CHECK(ApiCall(port, "GET", "/v1/models", "", {{"Authorization", "Basic gw-key"}}).status == 401);
  CHECK(ApiCall(port, "GET", "/v1/models").status == 401);

  // A prompt as long as the context: a 400 naming "prompt" on completions, "messages" on chat.
  const Headers key = {{"Authorization", "bearer gw-key"}};
  r = ApiCall(port, "GET", "/v1/models", "", key);
  const int64_t context = Json::parse(r.body)["data"][0]["max_model_len"].get<int64_t>();
  REQUIRE(context > 0);
  r = PostJson(port, "/v1/completions",
               {{"prompt", std::vector<int>(static_cast<size_t>(context), 1)}, {"max_tokens", 1}},
               key);
  CHECK(r.status == 400);
  CAPTURE(r.body);
  Json error = Json::parse(r.body)["error"];
  CHECK(error["code"] == "context_length_exceeded");
  CHECK(error["param"] == "prompt");
  std::string words;
  for (int64_t i = 0; i < context; ++i) words += " hello";
  r = PostJson(port, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", words}}}}, {"max_tokens", 1}}, key);
  CHECK(r.status == 400);
  error = Json::parse(r.body)["error"];
  CHECK(error["code"] == "context_length_exceeded");
  CHECK(error["param"] == "messages");
}

}  // namespace
}  // namespace m3::test
