// The MiniMax-M3 chat protocol through the real processes: `m3-gateway serve` on the m3-chat
// test model (the real M3 template; its tokenizer is chat-e2e's with `<mm:think>`,
// `</mm:think>` and the tool namespace token as special tokens, same ids) in front of
// `m3-engine serve` on chat-e2e/model, with --default-chat-template-kwargs. The random model's
// words are not controllable (tests/openai/m3_chat_stream_test.cpp drives the parsers with
// scripted output); here every thinking mode must reach the template (the prompt's last token
// is the mode's marker, the server's default applies unless the request overrides it), the
// responses must be well formed, streamed equal to whole, with no special-token text in any
// field; bad kwargs and reasoning fields get OpenAI 400s naming the field.
#include <doctest/doctest.h>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":
  {"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";

Json Messages() {
  return Json::parse(R"([
    {"role":"user","content":"What is the weather in Paris?"},
    {"role":"assistant","content":"","reasoning_content":"I should ask the tool.",
     "tool_calls":[{"id":"call_1","type":"function",
       "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":2}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sunny"},
    {"role":"assistant","content":"It is sunny.","reasoning":"The tool answered."},
    {"role":"user","content":"And tomorrow?"}])");
}

Json Body(const Json& kwargs) {
  Json body = {{"model", "m3-chat"},
               {"messages", Messages()},
               {"tools", Json::parse(kTools)},
               {"max_tokens", 12},
               {"temperature", 0}};
  if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
  return body;
}

bool HasSpecialText(const std::string& s) {
  for (const char* t : {"<mm:think>", "</mm:think>", "]<]minimax[>[", "[e~[", "]~b]"}) {
    if (s.find(t) != std::string::npos) return true;
  }
  return false;
}

// The last token of the request's prompt, as /tokenize renders it.
std::string LastPromptToken(uint16_t port, const Json& kwargs) {
  Json body = {{"model", "m3-chat"},
               {"messages", Messages()},
               {"tools", Json::parse(kTools)},
               {"return_token_strs", true}};
  if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
  const ApiReply r = PostJson(port, "/tokenize", body);
  REQUIRE_MESSAGE(r.status == 200, r.body);
  return Json::parse(r.body)["token_strs"].back().get<std::string>();
}

struct Reply {
  std::string content, reasoning, finish_reason;
  Json tool_calls = Json::array();
  int64_t prompt_tokens = 0;
  std::string raw;  // non-streaming: the output tokens' own texts (logprobs), special ones too
};

Reply Chat(uint16_t port, Json body, bool stream) {
  body["stream"] = stream;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  const ApiReply r = PostJson(port, "/v1/chat/completions", body);
  REQUIRE_MESSAGE(r.status == 200, r.body);
  Reply out;
  if (stream) {
    const StreamSummary s = ReadSse(r.body);
    CHECK(s.well_formed);
    CHECK(s.done);
    CHECK(s.errors.empty());
    out.content = s.content;
    out.reasoning = s.reasoning;
    out.finish_reason = s.finish_reason;
    out.prompt_tokens = s.usage["prompt_tokens"];
    CHECK_MESSAGE(!HasSpecialText(r.body), r.body);
  } else {
    const Json j = Json::parse(r.body);
    if (body.value("logprobs", false)) {
      for (const Json& t : j["choices"][0]["logprobs"]["content"]) out.raw += t["token"];
    }
    CHECK(j["object"] == "chat.completion");
    const Json& m = j["choices"][0]["message"];
    CHECK(m["role"] == "assistant");
    out.content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    out.reasoning = m.contains("reasoning_content") && m["reasoning_content"].is_string()
                        ? m["reasoning_content"].get<std::string>()
                        : "";
    if (m.contains("tool_calls")) out.tool_calls = m["tool_calls"];
    out.finish_reason = j["choices"][0]["finish_reason"];
    out.prompt_tokens = j["usage"]["prompt_tokens"];
    CHECK_MESSAGE(!HasSpecialText(m.dump()), m.dump());
  }
  CHECK((out.finish_reason == "stop" || out.finish_reason == "length" ||
         out.finish_reason == "tool_calls"));
  CHECK((out.finish_reason == "tool_calls") == !out.tool_calls.empty());
  return out;
}

void Fails(uint16_t port, const Json& body, const std::string& param, const std::string& code) {
  const ApiReply r = PostJson(port, "/v1/chat/completions", body);
  CHECK_MESSAGE(r.status == 400, r.body);
  const Json j = Json::parse(r.body);
  CHECK(j["error"]["type"] == "invalid_request_error");
  CHECK(j["error"]["param"] == param);
  CHECK(j["error"]["code"] == code);
  CHECK(j["error"]["message"].get<std::string>().find(param) != std::string::npos);
}

TEST_CASE("m3-chat over HTTP: thinking modes, defaults, well-formed answers") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("m3-chat/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "m3-chat",
                          "--default-chat-template-kwargs", R"({"thinking_mode":"enabled"})"});
  const uint16_t port = gateway.http_port();

  // The server's default (enabled) applies; a request's mode overrides it; null unsets it.
  CHECK(LastPromptToken(port, nullptr) == "<mm:think>");
  CHECK(LastPromptToken(port, {{"thinking_mode", "enabled"}}) == "<mm:think>");
  CHECK(LastPromptToken(port, {{"thinking_mode", "disabled"}}) == "</mm:think>");
  CHECK(LastPromptToken(port, {{"thinking_mode", "adaptive"}}) != "<mm:think>");
  CHECK(LastPromptToken(port, {{"thinking_mode", nullptr}}) != "<mm:think>");

  int64_t enabled_prompt = 0;
  for (const Json& kwargs :
       {Json(nullptr), Json{{"thinking_mode", "enabled"}}, Json{{"thinking_mode", "disabled"}},
        Json{{"thinking_mode", "adaptive"}}}) {
    CAPTURE(kwargs.dump());
    Json logprobs = Body(kwargs);
    logprobs["logprobs"] = true;
    const Reply whole = Chat(port, logprobs, false);
    const Reply streamed = Chat(port, Body(kwargs), true);
    REQUIRE(!whole.raw.empty());
    CHECK(streamed.content == whole.content);
    CHECK(streamed.reasoning == whole.reasoning);
    CHECK(streamed.finish_reason == whole.finish_reason);
    CHECK(streamed.prompt_tokens == whole.prompt_tokens);
    CHECK(!(whole.content + whole.reasoning).empty());
    if (kwargs.is_null()) enabled_prompt = whole.prompt_tokens;
    const std::string mode = kwargs.is_object() ? kwargs["thinking_mode"] : "enabled";
    if (mode == "enabled") {
      CHECK(whole.prompt_tokens == enabled_prompt);
      // The prompt opened the reasoning: all of it is reasoning until the model closes it.
      if (whole.raw.find("</mm:think>") == std::string::npos) {
        CHECK(whole.content.empty());
        CHECK(!whole.reasoning.empty());
      }
    } else if (whole.raw.find("<mm:think>") == std::string::npos) {
      // Closed (disabled) or not opened (adaptive): no reasoning unless the model opens it.
      CHECK(whole.reasoning.empty());
      CHECK(!whole.content.empty());
    }
  }
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("m3-chat over HTTP: bad kwargs and reasoning fields are 400s naming the field") {
  ServerProcess engine("chat-e2e/model");
  GatewayProcess gateway({"serve", "--model", DataPath("m3-chat/model"), "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "m3-chat"});
  const uint16_t port = gateway.http_port();
  Fails(port, Body({{"thinking_mode", "sometimes"}}), "chat_template_kwargs.thinking_mode",
        "invalid_value");
  Fails(port, Body({{"thinking_mode", 1}}), "chat_template_kwargs.thinking_mode", "invalid_type");
  Json body = Body(nullptr);
  body["chat_template_kwargs"] = "enabled";
  Fails(port, body, "chat_template_kwargs", "invalid_type");
  body = Body(nullptr);
  body["messages"][3]["reasoning_content"] = Json::array();
  Fails(port, body, "messages[3].reasoning_content", "invalid_type");
  body = Body(nullptr);
  body["messages"][3]["reasoning"] = 7;
  Fails(port, body, "messages[3].reasoning", "invalid_type");
  body = Body(nullptr);
  body["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  Fails(port, body, "messages[1].tool_calls[0].function.arguments", "invalid_value");
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("m3-gateway serve refuses bad --default-chat-template-kwargs at start") {
  for (const std::string bad : {"{", "[1]", R"({"thinking_mode":"max"})"}) {
    CAPTURE(bad);
    const ProcessResult r =
        RunProcess({BinPath("m3-gateway"), "serve", "--model", DataPath("m3-chat/model"), "--port",
                    "0", "--engine", "127.0.0.1:1", "--default-chat-template-kwargs", bad});
    CHECK(r.exit_code != 0);
    CHECK((r.out + r.err).find("--default-chat-template-kwargs") != std::string::npos);
  }
}

}  // namespace
}  // namespace m3::test
