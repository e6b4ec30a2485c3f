// The Anthropic Messages API over HTTP against the real gateway and engine: the refusals the
// request head decides in Anthropic's error shape for paths under /v1/messages (and OpenAI's
// elsewhere), the API key in x-api-key or a bearer token on every route, count_tokens equal to
// /tokenize's count of the same conversation, and an engine killed mid-stream ending the
// message stream with an Anthropic "error" event, as does the end of the shutdown grace period.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

const Json kMessages = Json::array({{{"role", "user"}, {"content", "Hello there"}}});

Json MessageBody(int max_tokens = 4) {
  return {{"model", "chat-e2e"}, {"max_tokens", max_tokens}, {"messages", kMessages}};
}

// An Anthropic error body of `type` with a message.
void CheckAnthropicError(const ApiReply& r, int status, const std::string& type,
                         const std::string& what) {
  CAPTURE(what);
  CAPTURE(r.body);
  CHECK(r.status == status);
  const Json j = Json::parse(r.body, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["type"] == "error");
  CHECK(j["error"]["type"] == type);
  CHECK(!j["error"]["message"].get<std::string>().empty());
  CHECK_FALSE(j.contains("code"));
}

void CheckOpenAiError(const ApiReply& r, int status, const std::string& what) {
  CAPTURE(what);
  CAPTURE(r.body);
  CHECK(r.status == status);
  const Json j = Json::parse(r.body, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["error"]["code"].is_string());
  CHECK_FALSE(j.contains("type"));
}

// The events of an Anthropic stream as (name, data); `well_formed` false when one is not
// "event: <name>\ndata: <json>" with data.type equal to the name.
struct Events {
  std::vector<std::pair<std::string, Json>> list;
  bool well_formed = true;
};

Events ReadEvents(const std::string& sse) {
  Events out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    const std::string e = sse.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? sse.size() : end + 2;
    const size_t nl = e.find('\n');
    if (e.rfind("event: ", 0) != 0 || nl == std::string::npos ||
        e.compare(nl, 7, "\ndata: ") != 0) {
      out.well_formed = false;
      continue;
    }
    const std::string name = e.substr(7, nl - 7);
    Json data = Json::parse(e.substr(nl + 7), nullptr, false);
    if (!data.is_object() || data["type"] != name) out.well_formed = false;
    out.list.emplace_back(name, std::move(data));
  }
  return out;
}

TEST_CASE("Messages API over HTTP: Anthropic refusals, both key headers, count_tokens") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e", "--api-key",
                          "test-key"});
  const uint16_t port = gateway.http_port();
  const Headers json = {{"Content-Type", "application/json"}};
  const Headers x_api_key = {{"Content-Type", "application/json"}, {"x-api-key", "test-key"}};
  const Headers bearer = {{"Content-Type", "application/json"},
                          {"Authorization", "Bearer test-key"}};
  const std::string body = MessageBody().dump();

  {
    const ApiReply r = ApiCall(port, "POST", "/v1/messages", body, json);
    CheckAnthropicError(r, 401, "authentication_error", "no API key");
    CHECK(r.headers.count("www-authenticate"));
    CHECK(r.body.find("x-api-key") != std::string::npos);  // the message says how to send it
  }
  CheckAnthropicError(ApiCall(port, "POST", "/v1/messages", body,
                              {{"Content-Type", "application/json"}, {"x-api-key", "wrong"}}),
                      401, "authentication_error", "wrong x-api-key");
  // A key that is sent must be valid, whichever header carries it.
  CheckAnthropicError(ApiCall(port, "POST", "/v1/messages/count_tokens", body,
                              {{"Content-Type", "application/json"},
                               {"x-api-key", "wrong"},
                               {"Authorization", "Bearer test-key"}}),
                      401, "authentication_error", "wrong x-api-key beside a good bearer token");
  {
    const ApiReply r = ApiCall(port, "GET", "/v1/messages", "", x_api_key);
    CheckAnthropicError(r, 405, "invalid_request_error", "wrong method");
    CHECK(r.headers.at("allow") == "POST");
  }
  CheckAnthropicError(ApiCall(port, "POST", "/v1/messages/batches", body, x_api_key), 404,
                      "not_found_error", "unknown route under /v1/messages");
  CheckAnthropicError(ApiCall(port, "POST", "/v1/messages", body,
                              {{"Content-Type", "text/plain"}, {"x-api-key", "test-key"}}),
                      415, "invalid_request_error", "non-JSON content type");
  CheckAnthropicError(ApiCall(port, "POST", "/v1/messages", "{\"model\":", x_api_key), 400,
                      "invalid_request_error", "malformed JSON");
  CheckAnthropicError(
      ApiCall(port, "POST", "/v1/messages/count_tokens", "{\"model\":\"chat-e2e\"}", x_api_key),
      400, "invalid_request_error", "count_tokens without messages");
  // Paths outside the Messages API keep OpenAI's shape.
  CheckOpenAiError(ApiCall(port, "POST", "/v1/messagesx", body, x_api_key), 404, "other path");
  CheckOpenAiError(ApiCall(port, "POST", "/v1/chat/completions", body, json), 401, "chat, no key");

  // Either header authenticates every route.
  for (const Headers& auth : {x_api_key, bearer}) {
    const ApiReply m = ApiCall(port, "POST", "/v1/messages", body, auth);
    CHECK_MESSAGE(m.status == 200, m.body);
    CHECK(Json::parse(m.body)["type"] == "message");
    const Json chat = {{"model", "chat-e2e"}, {"max_tokens", 2}, {"messages", kMessages}};
    const ApiReply c = ApiCall(port, "POST", "/v1/chat/completions", chat.dump(), auth);
    CHECK_MESSAGE(c.status == 200, c.body);
    CHECK(ApiCall(port, "GET", "/v1/models", "", auth).status == 200);
  }

  // count_tokens counts what /tokenize counts for the same conversation.
  const Json count_body = {{"model", "chat-e2e"}, {"system", "Be brief."}, {"messages", kMessages}};
  const ApiReply counted =
      ApiCall(port, "POST", "/v1/messages/count_tokens", count_body.dump(), x_api_key);
  REQUIRE_MESSAGE(counted.status == 200, counted.body);
  Json openai_messages = kMessages;
  openai_messages.insert(openai_messages.begin(),
                         Json::object({{"role", "system"}, {"content", "Be brief."}}));
  const Json tokenize = {{"model", "chat-e2e"}, {"messages", openai_messages}};
  const ApiReply tokens = ApiCall(port, "POST", "/tokenize", tokenize.dump(), bearer);
  REQUIRE_MESSAGE(tokens.status == 200, tokens.body);
  CHECK(Json::parse(counted.body).dump() ==
        Json{{"input_tokens", Json::parse(tokens.body)["count"]}}.dump());
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("an engine killed mid-stream ends the message stream with an Anthropic error event") {
  auto engine = std::make_unique<ServerProcess>("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine",
                          engine->address(), "--served-model-name", "chat-e2e"});
  const uint16_t port = gateway.http_port();
  Json body = MessageBody(1500);
  body["stream"] = true;
  body["temperature"] = 0;
  std::atomic<bool> killed{false};
  std::string seen;
  const ApiReply r =
      ApiCall(port, "POST", "/v1/messages", body.dump(), {{"Content-Type", "application/json"}},
              60000, [&](std::string_view piece) {
                seen.append(piece);
                if (!killed && seen.find("_delta\"") != std::string::npos) {
                  engine->Kill();
                  killed = true;
                }
              });
  REQUIRE(killed);
  CHECK(r.status == 200);
  CHECK(r.complete);
  CHECK(r.headers.at("content-type").rfind("text/event-stream", 0) == 0);
  const Events events = ReadEvents(r.body);
  CHECK(events.well_formed);
  REQUIRE(events.list.size() >= 3);
  CHECK(events.list[0].first == "message_start");
  CHECK(events.list[1].first == "ping");
  const auto& [last, error] = events.list.back();
  CHECK(last == "error");
  CHECK(error["error"]["type"].is_string());
  CHECK(!error["error"]["message"].get<std::string>().empty());
  for (const auto& [name, data] : events.list) CHECK(name != "message_stop");
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("a message stream still running at the end of the shutdown grace period: error event") {
  ServerProcess engine("chat-e2e/model");
  auto gateway = std::make_unique<GatewayProcess>(std::vector<std::string>{
      "serve", "--model", DataPath("chat-e2e/model"), "--port", "0", "--engine", engine.address(),
      "--served-model-name", "chat-e2e", "--shutdown-grace-ms", "300"});
  const uint16_t port = gateway->http_port();
  Json body = MessageBody(3000);
  body["stream"] = true;
  body["temperature"] = 0;
  const StoppedStream stopped = StreamThenStop(port, "/v1/messages", body.dump(), "_delta\"",
                                               [&] { return gateway->Terminate(); });
  REQUIRE(stopped.started);
  CHECK(stopped.exit_status == 0);
  const ApiReply& r = stopped.reply;
  CHECK(r.status == 200);
  CHECK(r.complete);  // the chunked body ended properly: not a bare close
  const Events events = ReadEvents(r.body);
  CHECK(events.well_formed);
  REQUIRE(!events.list.empty());
  const auto& [last, error] = events.list.back();
  CHECK(last == "error");
  CHECK(error["error"]["message"].get<std::string>().find("shutting down") != std::string::npos);
  for (const auto& [name, data] : events.list) CHECK(name != "message_stop");
}

}  // namespace
}  // namespace m3::test
