// Real MiniMax-M3 reasoning and tool calls through the real processes: `m3-engine serve` and
// `m3-gateway serve` on the m3-agent test model, trained to answer the conversations of
// tests/data/m3-agent/eval.json with memorized replies (scripts/golden/train_m3_agent_model.py).
// Each case must answer as trained, whole and streamed; in the stream each tool call's first
// delta (id and name) comes in an earlier chunk than its last argument fragment, and the
// fragments join to its arguments; the Messages API streams a thinking block, then tool_use
// blocks of input_json_delta fragments. No special-token text reaches the client.
#include <doctest/doctest.h>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

// Ordered: the model was trained on prompts whose tool schemas keep their keys in the order
// eval.json gives them, and the template renders them in the order the request sends them.
using Json = nlohmann::ordered_json;

ApiReply Post(uint16_t port, const std::string& target, const Json& body) {
  return ApiCall(port, "POST", target, body.dump(), {{"Content-Type", "application/json"}});
}

// JSON values equal regardless of key order.
bool Same(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

bool HasSpecialText(const std::string& s) {
  for (const char* t :
       {"<mm:think>", "</mm:think>", "]<]minimax[>[", "<tool_call>", "<invoke", "[e~[", "]~b]"}) {
    if (s.find(t) != std::string::npos) return true;
  }
  return false;
}

// The chat request of an eval.json case: its tool-call arguments (objects, as the template sees
// them) sent as JSON text, as the API takes them.
Json ChatBody(const Json& c) {
  Json messages = c["request"]["messages"];
  for (Json& m : messages) {
    if (!m.contains("tool_calls")) continue;
    for (Json& t : m["tool_calls"]) t["function"]["arguments"] = t["function"]["arguments"].dump();
  }
  Json body = {
      {"model", "m3-agent"}, {"messages", messages}, {"max_tokens", 400}, {"temperature", 0}};
  if (c["request"].contains("tools")) body["tools"] = c["request"]["tools"];
  if (!c["thinking_mode"].is_null())
    body["chat_template_kwargs"] = {{"thinking_mode", c["thinking_mode"]}};
  return body;
}

// The JSON payloads of an SSE body's data events, [DONE] left out.
std::vector<Json> Events(const std::string& sse) {
  std::vector<Json> out;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find('\n', pos);
    const std::string data = sse.substr(pos + 6, end - pos - 6);
    if (data != "[DONE]") out.push_back(Json::parse(data));
    pos = end;
  }
  return out;
}

void CheckCase(uint16_t port, const Json& c) {
  CAPTURE(c["name"].get<std::string>());
  CAPTURE(c["thinking_mode"].dump());
  const Json& want = c["expected"];
  const std::string finish = want["tool_calls"].is_null() ? "stop" : "tool_calls";

  const ApiReply whole = Post(port, "/v1/chat/completions", ChatBody(c));
  REQUIRE_MESSAGE(whole.status == 200, whole.body);
  const Json j = Json::parse(whole.body);
  const Json& m = j["choices"][0]["message"];
  CHECK_MESSAGE(!HasSpecialText(m.dump()), m.dump());
  CHECK(j["choices"][0]["finish_reason"] == finish);
  CHECK(m.value("reasoning_content", Json()) == want["reasoning_content"]);
  CHECK(m["content"] == want["content"]);
  CHECK(j["usage"]["completion_tokens"] == c["reply_ids"].size());
  if (finish == "tool_calls") {
    REQUIRE(m["tool_calls"].size() == want["tool_calls"].size());
    for (size_t i = 0; i < want["tool_calls"].size(); ++i) {
      CHECK(m["tool_calls"][i]["function"]["name"] == want["tool_calls"][i]["name"]);
      CHECK(Same(Json::parse(m["tool_calls"][i]["function"]["arguments"].get<std::string>()),
                 want["tool_calls"][i]["arguments"]));
    }
  }

  Json body = ChatBody(c);
  body["stream"] = true;
  const ApiReply streamed = Post(port, "/v1/chat/completions", body);
  REQUIRE_MESSAGE(streamed.status == 200, streamed.body);
  CHECK_MESSAGE(!HasSpecialText(streamed.body), streamed.body);
  const StreamSummary s = ReadSse(streamed.body);
  CHECK(s.done);
  CHECK(s.finish_reason == finish);
  CHECK(s.reasoning ==
        (want["reasoning_content"].is_null() ? "" : want["reasoning_content"].get<std::string>()));
  CHECK(s.content == (want["content"].is_null() ? "" : want["content"].get<std::string>()));
  // Per call: the chunk of its first delta, of its last argument fragment, and its arguments.
  std::vector<int> first, last;
  std::vector<std::string> args;
  const std::vector<Json> events = Events(streamed.body);
  for (int n = 0; n < static_cast<int>(events.size()); ++n) {
    for (const Json& choice : events[n]["choices"]) {
      if (!choice["delta"].contains("tool_calls")) continue;
      for (const Json& t : choice["delta"]["tool_calls"]) {
        const size_t i = t["index"];
        if (i == first.size()) {
          CHECK(t["id"].is_string());
          CHECK(t["function"]["name"] == want["tool_calls"][i]["name"]);
          first.push_back(n);
          last.push_back(n);
          args.emplace_back();
        }
        REQUIRE(i < first.size());
        const std::string piece = t["function"].value("arguments", "");
        if (!piece.empty()) last[i] = n;
        args[i] += piece;
      }
    }
  }
  REQUIRE(args.size() == (finish == "tool_calls" ? want["tool_calls"].size() : 0));
  for (size_t i = 0; i < args.size(); ++i) {
    CHECK(first[i] < last[i]);
    CHECK(Same(Json::parse(args[i]), want["tool_calls"][i]["arguments"]));
  }
}

Json Find(const Json& cases, const std::string& name, const Json& mode) {
  for (const Json& c : cases) {
    if (c["name"] == name && c["thinking_mode"] == mode) return c;
  }
  FAIL("no case " << name);
  return {};
}

TEST_CASE("m3-agent over HTTP: real reasoning and tool calls, whole and streamed") {
  const Json cases = Json::parse(ReadFile(DataPath("m3-agent/eval.json")))["cases"];
  REQUIRE(cases.size() >= 4);
  ServerProcess engine("m3-agent/model");
  GatewayProcess gateway({"serve", "--model", DataPath("m3-agent/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "m3-agent"});
  const uint16_t port = gateway.http_port();
  for (const Json& c : cases) CheckCase(port, c);

  {  // The Messages API streams thinking, then tool_use input fragments.
    const Json c = Find(cases, "picnic", "enabled");
    Json tools = Json::array();
    for (const Json& t : c["request"]["tools"]) {
      tools.push_back({{"name", t["function"]["name"]},
                       {"description", t["function"]["description"]},
                       {"input_schema", t["function"]["parameters"]}});
    }
    const Json body = {
        {"model", "m3-agent"},
        {"max_tokens", 1100},
        {"temperature", 0},
        {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
        {"tools", tools},
        {"stream", true},
        {"messages", {{{"role", "user"}, {"content", c["request"]["messages"][0]["content"]}}}}};
    const ApiReply r = Post(port, "/v1/messages", body);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CHECK_MESSAGE(!HasSpecialText(r.body), r.body);
    std::vector<Json> blocks;
    std::vector<int> fragments;
    std::string stop;
    for (const Json& e : Events(r.body)) {
      if (e["type"] == "content_block_start") {
        blocks.push_back(e["content_block"]);
        fragments.push_back(0);
        if (blocks.back()["type"] == "tool_use") blocks.back()["json"] = "";
      } else if (e["type"] == "content_block_delta") {
        Json& b = blocks.at(e["index"].get<size_t>());
        const Json& d = e["delta"];
        if (d["type"] == "thinking_delta")
          b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
        if (d["type"] == "input_json_delta") {
          b["json"] = b["json"].get<std::string>() + d["partial_json"].get<std::string>();
          ++fragments[e["index"].get<size_t>()];
        }
      } else if (e["type"] == "message_delta") {
        stop = e["delta"]["stop_reason"];
      }
    }
    const Json& want = c["expected"];
    REQUIRE(blocks.size() == 1 + want["tool_calls"].size());
    CHECK(blocks[0]["type"] == "thinking");
    CHECK(blocks[0]["thinking"] == want["reasoning_content"]);
    for (size_t i = 0; i < want["tool_calls"].size(); ++i) {
      const Json& b = blocks[i + 1];
      CHECK(b["type"] == "tool_use");
      CHECK(b["name"] == want["tool_calls"][i]["name"]);
      CHECK(fragments[i + 1] >= 2);
      CHECK(Same(Json::parse(b["json"].get<std::string>()), want["tool_calls"][i]["arguments"]));
    }
    CHECK(stop == "tool_use");
  }
  CHECK(gateway.Terminate() == 0);
}

}  // namespace
}  // namespace m3::test
