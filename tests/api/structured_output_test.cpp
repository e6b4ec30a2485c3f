// Structured outputs through the real processes on CPU (`m3-engine serve` + `m3-gateway serve`):
// on the demo model, every schema of tests/data/grammar/schemas (response_format json_schema,
// strict) answered whole and streamed, several requests in flight at once: each answer that
// ends on its own ("stop") parses and validates against its schema (tests/grammar's validator,
// which shares no code with the grammar); json_object, guided_regex, guided_choice and
// structured_outputs.grammar answers follow their constraint; an invalid schema, regex or
// grammar is a 400 naming the problem; forced tool calls in the M2 format validate. On the
// m3-agent model (MiniMax-M3 tool calls, thinking
// enabled and disabled), tool_choice "required" and a named function answer with calls whose
// arguments validate against the tool's schema and finish_reason "tool_calls";
// parallel_tool_calls false gives exactly one call; Anthropic's tool_choice any answers with
// tool_use.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/grammar/schema_validator.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::ordered_json;

ApiReply Post(uint16_t port, const std::string& target, const Json& body) {
  return ApiCall(port, "POST", target, body.dump(), {{"Content-Type", "application/json"}}, 120000);
}

// Content and finish reason of a chat answer, whole or streamed.
struct Answer {
  int status = 0;
  std::string content, finish, raw;
  Json tool_calls = Json::array();
};

Answer Chat(uint16_t port, Json body, bool stream) {
  body["stream"] = stream;
  const ApiReply r = Post(port, "/v1/chat/completions", body);
  Answer a;
  a.status = r.status;
  a.raw = r.body;
  if (r.status != 200) return a;
  if (!stream) {
    const Json j = Json::parse(r.body);
    const Json& m = j["choices"][0]["message"];
    a.content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    a.finish = j["choices"][0]["finish_reason"].get<std::string>();
    if (m.contains("tool_calls")) a.tool_calls = m["tool_calls"];
    return a;
  }
  const StreamSummary s = ReadSse(r.body);
  CHECK(s.done);
  a.content = s.content;
  a.finish = s.finish_reason;
  return a;
}

void RunParallel(int n, int threads, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  for (auto& t : pool) t.join();
}

TEST_CASE("structured outputs on the demo model: every schema of the suite, whole and streamed") {
  ServerProcess engine("demo-model/model");
  GatewayProcess gateway({"serve", "--model", DataPath("demo-model/model"), "--port", "0",
                          "--engine", engine.address(), "--served-model-name", "demo"});
  const uint16_t port = gateway.http_port();
  std::vector<std::pair<std::string, Json>> schemas;
  for (const auto& e : std::filesystem::directory_iterator(DataPath("grammar/schemas")))
    if (e.path().extension() == ".json")
      schemas.emplace_back(e.path().stem().string(), Json::parse(ReadFile(e.path().string())));
  std::sort(schemas.begin(), schemas.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  REQUIRE(schemas.size() >= 50);
  std::mutex mu;
  int stopped = 0, by_length = 0;
  std::vector<std::string> failures;
  RunParallel(static_cast<int>(schemas.size()) * 2, 4, [&](int k) {
    const auto& [name, schema] = schemas[static_cast<size_t>(k / 2)];
    const bool stream = k % 2 == 1;
    Json body = {{"model", "demo"},
                 {"messages", {{{"role", "user"}, {"content", "Answer in JSON: " + name}}}},
                 {"max_tokens", 384},
                 {"temperature", 0.8},
                 {"seed", k},
                 {"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", name}, {"schema", schema}, {"strict", true}}}}}};
    const Answer a = Chat(port, body, stream);
    std::lock_guard<std::mutex> lock(mu);
    if (a.status != 200) {
      failures.push_back(name + ": status " + std::to_string(a.status) + " " + a.raw);
      return;
    }
    if (a.finish == "length") {
      ++by_length;  // cut by max_tokens: a prefix, not an answer
      return;
    }
    ++stopped;
    const Json v = Json::parse(a.content, nullptr, false);
    std::string why;
    if (v.is_discarded()) {
      failures.push_back(name + (stream ? " (stream)" : "") + ": not JSON: " + a.content);
    } else if (!ValidateJson(v, schema, schema, why)) {
      failures.push_back(name + (stream ? " (stream)" : "") + ": " + why + ": " + a.content);
    }
  });
  MESSAGE("schemas: " << schemas.size() << ", answers ended by the model: " << stopped
                      << ", cut by max_tokens: " << by_length);
  for (const std::string& f : failures) MESSAGE(f);
  CHECK(failures.empty());
  // Nearly every answer completes: the grammar leads the model to the end of the value.
  CHECK(stopped >= static_cast<int>(schemas.size() * 2 * 8 / 10));

  // The other constraints, whole and streamed.
  for (const bool stream : {false, true}) {
    CAPTURE(stream);
    Json b = {{"model", "demo"},
              {"messages", {{{"role", "user"}, {"content", "What colour is the shape?"}}}},
              {"max_tokens", 64},
              {"temperature", 1.0},
              {"seed", 5}};
    Json j = b;
    j["response_format"] = {{"type", "json_object"}};
    Answer a = Chat(port, j, stream);
    REQUIRE_MESSAGE(a.status == 200, a.raw);
    if (a.finish == "stop") CHECK(Json::parse(a.content, nullptr, false).is_object());
    j = b;
    j["guided_regex"] = "(red|green|blue) [a-z]{2,6}";
    a = Chat(port, j, stream);
    REQUIRE_MESSAGE(a.status == 200, a.raw);
    CHECK(a.finish == "stop");
    CHECK_MESSAGE(std::regex_match(a.content, std::regex("(red|green|blue) [a-z]{2,6}")),
                  a.content);
    j = b;
    j["guided_choice"] = {"circle", "square", "triangle"};
    a = Chat(port, j, stream);
    REQUIRE_MESSAGE(a.status == 200, a.raw);
    CHECK((a.content == "circle" || a.content == "square" || a.content == "triangle"));
    j = b;
    j["structured_outputs"] = {
        {"grammar", "root ::= \"The shape is \" (\"red\" | \"blue\") \".\""}};
    a = Chat(port, j, stream);
    REQUIRE_MESSAGE(a.status == 200, a.raw);
    CHECK((a.content == "The shape is red." || a.content == "The shape is blue."));
    // n = 3 with a schema: three valid answers.
    j = b;
    j["n"] = 3;
    j["max_tokens"] = 128;
    j["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "c"}, {"schema", Json::parse(R"({"type":"object","properties":{
                                 "colour":{"enum":["red","green","blue"]}},
                                 "required":["colour"],"additionalProperties":false})")}}}};
    if (!stream) {
      const ApiReply r = Post(port, "/v1/chat/completions", j);
      REQUIRE_MESSAGE(r.status == 200, r.body);
      const Json resp = Json::parse(r.body);
      REQUIRE(resp["choices"].size() == 3);
      for (const Json& c : resp["choices"]) {
        const Json v = Json::parse(c["message"]["content"].get<std::string>());
        CHECK(v["colour"].is_string());
      }
    }
  }

  // Invalid constraints: a 400 naming the problem.
  auto refused = [&](Json extra, const std::string& needle) {
    Json b = {
        {"model", "demo"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 8}};
    for (auto& [k, v] : extra.items()) b[k] = v;
    const ApiReply r = Post(port, "/v1/chat/completions", b);
    CHECK_MESSAGE(r.status == 400, r.body);
    CHECK_MESSAGE(r.body.find(needle) != std::string::npos, r.body);
  };
  refused({{"guided_regex", "[a-z"}}, "regex");
  refused({{"structured_outputs", {{"grammar", "root ::= undefined_rule"}}}}, "undefined_rule");
  refused({{"response_format",
            {{"type", "json_schema"},
             {"json_schema", {{"name", "bad"}, {"schema", {{"$ref", "#/$defs/missing"}}}}}}}},
          "missing");
  refused({{"response_format",
            {{"type", "json_schema"},
             {"json_schema", {{"name", "bad"}, {"schema", {{"type", "objekt"}}}}}}}},
          "objekt");
  // Forced calls in the M2 format the demo model's template speaks, one call each.
  const Json tools = Json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string","maxLength":20},"days":{"type":"integer","minimum":1,
      "maximum":7}},"required":["city","days"]}}},
    {"type":"function","function":{"name":"add","parameters":{"type":"object",
      "properties":{"a":{"type":"number"},"b":{"type":"boolean"}},"required":["a","b"]}}}])");
  int calls = 0;
  for (int k = 0; k < 6; ++k) {
    CAPTURE(k);
    Json body = {{"model", "demo"},
                 {"messages", {{{"role", "user"}, {"content", "What is the weather?"}}}},
                 {"max_tokens", 200},
                 {"temperature", 1.0},
                 {"seed", k},
                 {"tools", tools},
                 {"parallel_tool_calls", false}};
    body["tool_choice"] =
        k % 2 ? Json{{"type", "function"}, {"function", {{"name", "add"}}}} : Json("required");
    const Answer a = Chat(port, body, false);
    REQUIRE_MESSAGE(a.status == 200, a.raw);
    if (a.finish == "length") continue;
    CHECK_MESSAGE(a.finish == "tool_calls", a.raw);
    REQUIRE_MESSAGE(a.tool_calls.size() == 1, a.raw);
    const Json& fn = a.tool_calls[0]["function"];
    if (k % 2) CHECK(fn["name"] == "add");
    const Json schema = fn["name"] == "add" ? tools[1]["function"]["parameters"]
                                            : tools[0]["function"]["parameters"];
    const Json args = Json::parse(fn["arguments"].get<std::string>());
    std::string why;
    CHECK_MESSAGE(ValidateJson(args, schema, schema, why), why << ": " << args.dump());
    ++calls;
  }
  CHECK(calls >= 4);
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("tool_choice required / named on m3-agent: calls whose arguments validate") {
  ServerProcess engine("m3-agent/model");
  GatewayProcess gateway({"serve", "--model", DataPath("m3-agent/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "m3-agent"});
  const uint16_t port = gateway.http_port();
  const Json tools = Json::parse(R"([
    {"type":"function","function":{"name":"get_weather","description":"Get the weather forecast for a city.",
      "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":24},
        "days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}}},
    {"type":"function","function":{"name":"create_event","description":"Create a calendar event.",
      "parameters":{"type":"object","properties":{"title":{"type":"string","maxLength":24},
        "attendees":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3},
        "all_day":{"type":"boolean"}},"required":["title","all_day"]}}}])");
  std::map<std::string, Json> schema_of;
  for (const Json& t : tools) schema_of[t["function"]["name"]] = t["function"]["parameters"];
  int checked = 0;
  for (const char* mode : {"enabled", "disabled"}) {
    for (const char* prompt : {"What is the weather in Paris for 3 days?", "Tell me a story."}) {
      for (const bool named : {false, true}) {
        for (const bool parallel : {true, false}) {
          CAPTURE(mode);
          CAPTURE(prompt);
          CAPTURE(named);
          CAPTURE(parallel);
          Json body = {{"model", "m3-agent"},
                       {"messages", {{{"role", "user"}, {"content", prompt}}}},
                       {"tools", tools},
                       {"max_tokens", 400},
                       {"temperature", 0.7},
                       {"seed", checked},
                       {"parallel_tool_calls", parallel},
                       {"chat_template_kwargs", {{"thinking_mode", mode}}}};
          body["tool_choice"] =
              named ? Json{{"type", "function"}, {"function", {{"name", "create_event"}}}}
                    : Json("required");
          const Answer a = Chat(port, body, false);
          REQUIRE_MESSAGE(a.status == 200, a.raw);
          if (a.finish == "length") continue;  // still thinking at max_tokens
          CHECK_MESSAGE(a.finish == "tool_calls", a.raw);
          REQUIRE_MESSAGE(!a.tool_calls.empty(), a.raw);
          if (!parallel) CHECK(a.tool_calls.size() == 1);
          for (const Json& call : a.tool_calls) {
            const std::string name = call["function"]["name"];
            if (named) CHECK(name == "create_event");
            REQUIRE(schema_of.count(name) == 1);
            const Json args = Json::parse(call["function"]["arguments"].get<std::string>());
            std::string why;
            CHECK_MESSAGE(ValidateJson(args, schema_of[name], schema_of[name], why),
                          why << ": " << args.dump());
          }
          ++checked;
        }
      }
    }
  }
  MESSAGE("forced tool calls checked: " << checked << " of 16");
  CHECK(checked >= 12);
  // Anthropic's tool_choice any: a tool_use block.
  const Json messages_body = {
      {"model", "m3-agent"},
      {"max_tokens", 400},
      {"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
      {"tools", Json::parse(R"([{"name":"get_weather","input_schema":{"type":"object",
        "properties":{"city":{"type":"string","maxLength":24}},"required":["city"]}}])")},
      {"tool_choice", {{"type", "any"}}}};
  const ApiReply r = Post(port, "/v1/messages", messages_body);
  REQUIRE_MESSAGE(r.status == 200, r.body);
  const Json m = Json::parse(r.body);
  if (m["stop_reason"] != "max_tokens") {
    CHECK(m["stop_reason"] == "tool_use");
    bool has_tool_use = false;
    for (const Json& block : m["content"]) has_tool_use |= block["type"] == "tool_use";
    CHECK(has_tool_use);
  }
  CHECK(gateway.Terminate() == 0);
}

}  // namespace
}  // namespace m3::test
