// Every endpoint of `m3-gateway serve` besides chat's reference check: /v1/models, /tokenize
// (text and chat with an image: the count a chat completion reports) and /detokenize,
// /v1/completions whole and streamed, /health, /ready (503 with no engine), /metrics after
// traffic, /v1/preprocess, the CLI's refusals at start, and 429 when the server is saturated.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

TEST_CASE("endpoints: models, tokenize, detokenize, completions, health, ready, metrics") {
  const std::string folder = DataPath("chat-e2e");
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", folder + "/model", "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e"});
  const uint16_t port = gateway.http_port();

  ApiReply r = ApiCall(port, "GET", "/v1/models");
  REQUIRE(r.status == 200);
  Json j = Json::parse(r.body);
  CHECK(j["object"] == "list");
  REQUIRE(j["data"].size() == 1);
  CHECK(j["data"][0]["id"] == "chat-e2e");
  CHECK(j["data"][0]["object"] == "model");
  CHECK(j["data"][0]["max_model_len"].get<int64_t>() > 0);
  r = ApiCall(port, "GET", "/v1/models/chat-e2e");
  CHECK(r.status == 200);
  CHECK(Json::parse(r.body)["id"] == "chat-e2e");

  // /tokenize of a chat with an image counts what the chat completion sends the engine.
  const Json cases = Json::parse(ReadFile(folder + "/chat_cases.json"));
  const Json& image_case = cases[1];
  REQUIRE(image_case["name"] == "image");
  const Json messages = RewriteImages(image_case["messages"], [&](const std::string& rel, int) {
    return DataUri(folder + "/" + rel, "image/png");
  });
  r = PostJson(port, "/tokenize", {{"model", "chat-e2e"}, {"messages", messages}});
  REQUIRE_MESSAGE(r.status == 200, r.body);
  j = Json::parse(r.body);
  CHECK(j["tokens"] == image_case["prompt_ids"]);
  CHECK(j["count"] == image_case["prompt_ids"].size());
  CHECK(j["max_model_len"].get<int64_t>() > 0);

  r = PostJson(port, "/tokenize",
               {{"prompt", "Name three primary colours"}, {"return_token_strs", true}});
  REQUIRE_MESSAGE(r.status == 200, r.body);
  j = Json::parse(r.body);
  const Json ids = j["tokens"];
  CHECK(ids.size() == j["count"].get<size_t>());
  CHECK(j["token_strs"].size() == ids.size());
  r = PostJson(port, "/detokenize", {{"tokens", ids}});
  REQUIRE_MESSAGE(r.status == 200, r.body);
  CHECK(Json::parse(r.body)["prompt"].get<std::string>().find("Name three primary colours") !=
        std::string::npos);
  CHECK(PostJson(port, "/detokenize", {{"tokens", {1, -5}}}).status == 400);
  CHECK(PostJson(port, "/tokenize", {{"prompt", "x"}, {"model", "other"}}).status == 404);
  CHECK(PostJson(port, "/tokenize", Json::object()).status == 400);

  // Text completions, whole and streamed: the same greedy text.
  const Json completion = {{"model", "chat-e2e"},
                           {"prompt", "The colours of the rainbow are"},
                           {"max_tokens", 8},
                           {"temperature", 0}};
  r = PostJson(port, "/v1/completions", completion);
  REQUIRE_MESSAGE(r.status == 200, r.body);
  j = Json::parse(r.body);
  CHECK(j["object"] == "text_completion");
  CHECK(j["usage"]["completion_tokens"] == 8);
  const std::string whole = j["choices"][0]["text"].get<std::string>();
  Json streamed = completion;
  streamed["stream"] = true;
  r = PostJson(port, "/v1/completions", streamed);
  REQUIRE(r.status == 200);
  const StreamSummary s = ReadSse(r.body);
  CHECK(s.done);
  CHECK(s.text == whole);

  CHECK(ApiCall(port, "GET", "/health").status == 200);
  r = ApiCall(port, "GET", "/ready");
  CHECK(r.status == 200);
  CHECK(Json::parse(r.body)["engines"][0]["state"] == "healthy");

  // /v1/preprocess is served beside the API (JSON answer).
  r = PostJson(
      port, "/v1/preprocess",
      {{"content",
        {{{"type", "image_url"},
          {"image_url", {{"url", DataUri(folder + "/images/red_square.png", "image/png")}}}}}},
       {"response_format", "json"}});
  CHECK_MESSAGE(r.status == 200, r.body.substr(0, 300));

  r = ApiCall(port, "GET", "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.headers["content-type"].rfind("text/plain; version=0.0.4", 0) == 0);
  for (const char* needle :
       {"m3_gateway_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2",
        "m3_gateway_requests_total{endpoint=\"/tokenize\",status=\"200\"} 2",
        "m3_gateway_request_duration_seconds_bucket",
        "m3_gateway_time_to_first_token_seconds_count 2",
        "m3_gateway_inter_token_latency_seconds_count",
        "m3_gateway_preprocess_seconds_count{modality=\"image\"} 1",
        "m3_gateway_requests_in_flight 0", "m3_gateway_queue_depth{pool=\"media\"}",
        "m3_gateway_request_setup_seconds_count 2"}) {
    CAPTURE(needle);
    CHECK(r.body.find(needle) != std::string::npos);
  }
  // Engines by index: the open /metrics never shows an engine's address.
  CHECK(r.body.find("m3_gateway_engine_healthy{engine=\"0\"} 1") != std::string::npos);
  CHECK(r.body.find("m3_gateway_engine_outstanding_requests{engine=\"0\"} 0") != std::string::npos);
  CHECK(r.body.find(engine.address()) == std::string::npos);
  // The engine's speculative counters, from its Health answers (probed every second; this
  // engine does not speculate: zero).
  const std::string spec_line = "m3_gateway_engine_spec_draft_tokens{engine=\"0\"} 0";
  for (int i = 0; i < 40 && r.body.find(spec_line) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = ApiCall(port, "GET", "/metrics");
  }
  CHECK(r.body.find(spec_line) != std::string::npos);
  CHECK(r.body.find("m3_gateway_engine_spec_accepted_tokens{engine=\"0\"}") != std::string::npos);

  // Engine gone: not ready, and generation requests get 503.
  engine.Kill();
  bool unready = false;
  for (int i = 0; i < 100 && !unready; ++i) {
    unready = ApiCall(port, "GET", "/ready").status == 503;
    if (!unready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(unready);
  r = PostJson(port, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}});
  CHECK(r.status == 503);
  CHECK(ApiCall(port, "GET", "/health").status == 200);  // alive all the same
}

TEST_CASE("serve refuses bad set-ups at start with a message") {
  const std::string model = DataPath("chat-e2e/model");
  ProcessResult r = RunProcess({BinPath("m3-gateway"), "serve", "--model", model, "--port", "0"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--engine") != std::string::npos);
  r = RunProcess({BinPath("m3-gateway"), "serve", "--engine", "127.0.0.1:1", "--port", "0"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--model") != std::string::npos);
  // An engine of another model is named and refused.
  ServerProcess demo("demo-model/model");
  r = RunProcess({BinPath("m3-gateway"), "serve", "--model", model, "--port", "0", "--engine",
                  demo.address()});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find(demo.address()) != std::string::npos);
}

}  // namespace
}  // namespace m3::test

namespace m3::test {
namespace {

TEST_CASE("a saturated server answers 429 with Retry-After while it streams") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine.address(), "--max-concurrent-requests", "1"});
  const uint16_t port = gateway.http_port();
  const Json long_body = {{"messages", {{{"role", "user"}, {"content", "Go on"}}}},
                          {"max_tokens", 400},
                          {"ignore_eos", true},
                          {"stream", true}};
  std::mutex mu;
  std::condition_variable cv;
  bool streaming = false;
  ApiReply stream;
  std::thread client([&] {
    stream = ApiCall(port, "POST", "/v1/chat/completions", long_body.dump(),
                     {{"Content-Type", "application/json"}}, 60000, [&](std::string_view) {
                       std::lock_guard<std::mutex> lock(mu);
                       streaming = true;
                       cv.notify_all();
                     });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    CHECK(cv.wait_for(lock, std::chrono::seconds(30), [&] { return streaming; }));
  }
  const ApiReply busy =
      PostJson(port, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}});
  CHECK(busy.status == 429);
  CHECK(busy.headers.count("retry-after"));
  CHECK(Json::parse(busy.body)["error"]["type"] == "rate_limit_error");
  client.join();
  CHECK(stream.status == 200);
  CHECK(ReadSse(stream.body).done);
  // Admitted again once the stream is done.
  const ApiReply ok =
      PostJson(port, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}});
  CHECK_MESSAGE(ok.status == 200, ok.body);
}

}  // namespace
}  // namespace m3::test
