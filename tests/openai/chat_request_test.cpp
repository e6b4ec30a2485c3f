// Chat completion bodies: valid requests parse into the internal request with the model's
// defaults; every invalid field gives an OpenAI error with the right status, param and code.
#include <doctest/doctest.h>

#include <string>

#include "gateway/openai/chat_request.h"
#include "gateway/openai/request_body.h"

using namespace m3::openai;

namespace {

ServedModel Model() {
  ServedModel m;
  m.name = "m3";
  m.generation.temperature = 0.7;
  m.generation.top_p = 0.95;
  m.generation.top_k = 40;
  m.max_model_len = 4096;
  m.vocab_size = 1000;
  return m;
}

Json UserText(const std::string& text) {
  return Json::parse(R"({"model":"m3","messages":[{"role":"user","content":")" + text + "\"}]}");
}

ChatRequest Parse(const std::string& body, const ApiLimits& limits = {}) {
  return ParseChatRequest(ParseRequestBody(body, limits), Model(), limits);
}

// Parses `body`, which must fail; checks status, param and code, and returns the message.
std::string Fails(const std::string& body, int status, const std::string& param,
                  const std::string& code, const ApiLimits& limits = {}) {
  try {
    Parse(body, limits);
  } catch (const RequestError& e) {
    CHECK_MESSAGE(e.http_status() == status, body, ": ", e.what());
    CHECK_MESSAGE(e.param() == param, body, ": ", e.what());
    CHECK_MESSAGE(e.error_code() == code, body, ": ", e.what());
    const auto err = ErrorBody(e);
    CHECK(err["error"]["message"] == std::string(e.what()));
    CHECK(err["error"]["code"] == code);
    CHECK(err["error"]["type"] == (status == 404 ? "not_found_error" : "invalid_request_error"));
    if (param.empty()) {
      CHECK(err["error"]["param"].is_null());
    } else {
      CHECK(err["error"]["param"] == param);
    }
    return e.what();
  }
  FAIL("no error for ", body);
  return "";
}

// A valid body with `field` set to `value` (raw JSON).
std::string With(const std::string& field, const std::string& value) {
  return R"({"model":"m3","messages":[{"role":"user","content":"hi"}],")" + field + "\":" + value +
         "}";
}

}  // namespace

TEST_CASE("a text request takes the model's defaults") {
  ChatRequest r = ParseChatRequest(UserText("hello"), Model(), {});
  CHECK(r.model == "m3");
  CHECK(r.messages.size() == 1);
  CHECK(r.media.empty());
  CHECK(r.sampling.temperature == doctest::Approx(0.7));
  CHECK(r.sampling.top_p == doctest::Approx(0.95));
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.min_p == 0.0);
  CHECK(r.sampling.repetition_penalty == 1.0);
  CHECK_FALSE(r.sampling.max_tokens.has_value());
  CHECK_FALSE(r.sampling.seed.has_value());
  CHECK_FALSE(r.stream.stream);
  CHECK(r.tools.is_null());
  CHECK(r.add_generation_prompt);
}

TEST_CASE("do_sample = false in generation_config makes greedy the default") {
  ServedModel m = Model();
  m.generation.do_sample = false;
  CHECK(ParseChatRequest(UserText("x"), m, {}).sampling.temperature == 0.0);
  m.generation.max_new_tokens = 77;
  CHECK(ParseChatRequest(UserText("x"), m, {}).sampling.max_tokens == 77);
}

TEST_CASE("every sampling field is read") {
  ChatRequest r = Parse(R"({"model":"m3","messages":[{"role":"user","content":"hi"}],
    "max_tokens":10,"max_completion_tokens":12,"temperature":0,"top_p":0.5,"top_k":-1,
    "min_p":0.1,"seed":42,"stop":["a","bc"],"n":1,"presence_penalty":-1.5,
    "frequency_penalty":2,"repetition_penalty":1.1,"logprobs":true,"top_logprobs":3,
    "stream":true,"stream_options":{"include_usage":true},"stop_token_ids":[5,6],
    "ignore_eos":true,"min_tokens":2,"skip_special_tokens":false,
    "chat_template_kwargs":{"enable_thinking":false},"user":"u1"})");
  const SamplingRequest& s = r.sampling;
  CHECK(s.max_tokens == 12);  // max_completion_tokens wins
  CHECK(s.temperature == 0.0);
  CHECK(s.top_p == 0.5);
  CHECK(s.top_k == 0);
  CHECK(s.min_p == doctest::Approx(0.1));
  CHECK(s.seed == 42u);
  CHECK(s.stop == std::vector<std::string>{"a", "bc"});
  CHECK(s.presence_penalty == -1.5);
  CHECK(s.frequency_penalty == 2.0);
  CHECK(s.repetition_penalty == doctest::Approx(1.1));
  CHECK(s.logprobs);
  CHECK(s.top_logprobs == 3);
  CHECK(s.stop_token_ids == std::vector<int32_t>{5, 6});
  CHECK(s.ignore_eos);
  CHECK(s.min_tokens == 2);
  CHECK_FALSE(s.skip_special_tokens);
  CHECK(r.stream.stream);
  CHECK(r.stream.include_usage);
  CHECK(r.chat_template_kwargs == Json{{"enable_thinking", false}});
  CHECK(r.ToPromptInput().extra_context == Json{{"enable_thinking", false}});
  CHECK(Parse(With("stop", "\"END\"")).sampling.stop == std::vector<std::string>{"END"});
  CHECK(Parse(With("seed", "null")).sampling.seed == std::nullopt);  // null = absent
}

TEST_CASE("media parts are listed in order with their paths") {
  ChatRequest r = Parse(R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":[
    {"type":"text","text":"look"},
    {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},
    {"type":"video_url","video_url":{"url":"http://h/v.mp4"}},
    {"type":"image_url","image_url":"http://h/i.jpg"}]}]})");
  REQUIRE(r.media.size() == 3);
  CHECK(r.media[0].kind == m3::content::MediaKind::kImage);
  CHECK(r.media[0].detail == m3::content::ImageDetail::kLow);
  CHECK(r.media[0].param == "messages[1].content[1].image_url.url");
  CHECK(r.media[1].kind == m3::content::MediaKind::kVideo);
  CHECK(r.media[1].url == "http://h/v.mp4");
  CHECK(r.media[1].param == "messages[1].content[2].video_url.url");
  CHECK(r.media[2].url == "http://h/i.jpg");
  CHECK(r.media[2].param == "messages[1].content[3].image_url");
  // The same items, in the same order, as PromptBuilder will expand them.
  const auto parts = m3::text::FindMediaParts(r.messages);
  REQUIRE(parts.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(parts[i].url == r.media[i].url);
}

TEST_CASE("tools and tool_choice") {
  const std::string tools =
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
  ChatRequest r = Parse(With("tools", tools));
  CHECK(r.parse_tool_calls());
  CHECK(r.tool_choice == ToolChoice::kAuto);
  ChatRequest none = Parse(R"({"messages":[{"role":"user","content":"x"}],"tools":)" + tools +
                           R"(,"tool_choice":"none"})");
  CHECK(none.tool_choice == ToolChoice::kNone);
  CHECK_FALSE(none.parse_tool_calls());
  CHECK(none.tools.is_null());
  // A tool-call round trip: the assistant's call and the tool's answer are valid history.
  Parse(R"({"messages":[{"role":"user","content":"weather?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"call_0","content":"sunny"}],"tools":)" +
        tools + "}");

  Fails(R"({"messages":[{"role":"user","content":"x"}],"tools":)" + tools +
            R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})",
        422, "tool_choice.function.name", "unknown_tool");
  {
    const ChatRequest r = Parse(R"({"messages":[{"role":"user","content":"x"}],"tools":)" + tools +
                                R"(,"tool_choice":"required","parallel_tool_calls":false})");
    CHECK(r.tool_choice == ToolChoice::kRequired);
    CHECK(r.forced_tool.empty());
    CHECK(!r.parallel_tool_calls);
    const ChatRequest named =
        Parse(R"({"messages":[{"role":"user","content":"x"}],"tools":)" + tools +
              R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}}})");
    CHECK(named.tool_choice == ToolChoice::kRequired);
    CHECK(named.forced_tool == "get_weather");
  }
  Fails(With("tool_choice", "\"required\""), 400, "tool_choice", "invalid_value");  // no tools
  Fails(R"({"messages":[{"role":"user","content":"x"}],"tools":)" + tools +
            R"(,"tool_choice":"required","response_format":{"type":"json_object"}})",
        400, "response_format", "invalid_value");
  Fails(With("tool_choice", "\"sometimes\""), 400, "tool_choice", "invalid_value");
  Fails(With("tools", "{}"), 400, "tools", "invalid_type");
  Fails(With("tools", R"([{"type":"retrieval"}])"), 400, "tools[0].type", "invalid_value");
  Fails(With("tools", R"([{"type":"function"}])"), 400, "tools[0].function",
        "missing_required_parameter");
  Fails(With("tools", R"([{"type":"function","function":{"name":""}}])"), 400,
        "tools[0].function.name", "invalid_value");
  Fails(With("tools", R"([{"type":"function","function":{"name":"f","parameters":3}}])"), 400,
        "tools[0].function.parameters", "invalid_type");
}

TEST_CASE("body errors") {
  Fails("{\"messages\": [", 400, "", "invalid_json");
  Fails("[1,2]", 400, "", "invalid_type");
  Fails(std::string(200, '[') + std::string(200, ']'), 400, "", "invalid_json");
  ApiLimits small;
  small.max_body_bytes = 20;
  Fails(With("seed", "1"), 413, "", "payload_too_large", small);
}

TEST_CASE("model") {
  CHECK(Parse(R"({"messages":[{"role":"user","content":"x"}]})").model == "m3");
  const std::string msg = Fails(R"({"model":"m3x","messages":[{"role":"user","content":"x"}]})",
                                404, "model", "model_not_found");
  CHECK(msg.find("m3x") != std::string::npos);
  Fails(R"({"model":5,"messages":[{"role":"user","content":"x"}]})", 400, "model", "invalid_type");
}

TEST_CASE("message errors") {
  Fails(R"({"model":"m3"})", 400, "messages", "missing_required_parameter");
  Fails(R"({"messages":[]})", 400, "messages", "invalid_value");
  Fails(R"({"messages":"hi"})", 400, "messages", "invalid_type");
  Fails(R"({"messages":[3]})", 400, "messages[0]", "invalid_type");
  Fails(R"({"messages":[{"content":"x"}]})", 400, "messages[0].role", "missing_required_parameter");
  Fails(R"({"messages":[{"role":"robot","content":"x"}]})", 400, "messages[0].role",
        "invalid_value");
  Fails(R"({"messages":[{"role":"user"}]})", 400, "messages[0].content",
        "missing_required_parameter");
  Fails(R"({"messages":[{"role":"user","content":7}]})", 400, "messages[0].content",
        "invalid_type");
  Fails(R"({"messages":[{"role":"user","content":[{"text":"x"}]}]})", 400,
        "messages[0].content[0].type", "missing_required_parameter");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"text","text":1}]}]})", 400,
        "messages[0].content[0].text", "invalid_type");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})", 400,
        "messages[0].content[0].type", "invalid_value");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
        "messages[0].content[0].image_url", "missing_required_parameter");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", 400,
        "messages[0].content[0].image_url.url", "missing_required_parameter");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":""}}]}]})",
        400, "messages[0].content[0].image_url.url", "invalid_value");
  Fails(
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"max"}}]}]})",
      400, "messages[0].content[0].image_url.detail", "invalid_value");
  Fails(R"({"messages":[{"role":"user","content":[{"type":"video_url","video_url":5}]}]})", 400,
        "messages[0].content[0].video_url", "invalid_type");
  Fails(R"({"messages":[{"role":"system","content":[{"type":"image_url","image_url":"u"}]}]})", 400,
        "messages[0].content[0].type", "invalid_value");
  Fails(R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"type":"function"}]}]})",
        400, "messages[0].tool_calls[0].function", "missing_required_parameter");
  Fails(
      R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f","arguments":3}}]}]})",
      400, "messages[0].tool_calls[0].function.arguments", "invalid_type");
  ApiLimits limits;
  limits.max_media_items = 2;
  Fails(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":"a"},
    {"type":"image_url","image_url":"b"},{"type":"image_url","image_url":"c"}]}]})",
        413, "messages", "too_many_media_items", limits);
}

TEST_CASE("sampling errors name the field") {
  Fails(With("n", "\"1\""), 400, "n", "invalid_type");
  Fails(With("max_tokens", "-1"), 400, "max_tokens", "invalid_value");
  Fails(With("max_tokens", "0"), 400, "max_tokens", "invalid_value");
  Fails(With("max_tokens", "1.5"), 400, "max_tokens", "invalid_type");
  Fails(With("max_completion_tokens", "\"8\""), 400, "max_completion_tokens", "invalid_type");
  Fails(With("temperature", "2.5"), 400, "temperature", "invalid_value");
  Fails(With("temperature", "-0.1"), 400, "temperature", "invalid_value");
  Fails(With("temperature", "\"hot\""), 400, "temperature", "invalid_type");
  Fails(With("top_p", "0"), 400, "top_p", "invalid_value");
  Fails(With("top_p", "1.01"), 400, "top_p", "invalid_value");
  Fails(With("top_k", "-2"), 400, "top_k", "invalid_value");
  Fails(With("top_k", "2.5"), 400, "top_k", "invalid_type");
  Fails(With("min_p", "1.5"), 400, "min_p", "invalid_value");
  Fails(With("seed", "-3"), 400, "seed", "invalid_value");
  Fails(With("seed", "\"x\""), 400, "seed", "invalid_type");
  Fails(With("stop", "3"), 400, "stop", "invalid_type");
  Fails(With("stop", "[\"a\", 3]"), 400, "stop[1]", "invalid_type");
  Fails(With("stop", "[\"a\", \"\"]"), 400, "stop[1]", "invalid_value");
  Fails(With("stop", "\"\""), 400, "stop", "invalid_value");
  Fails(With("stop", "[" + std::string(16 * 4, ' ') + R"("1","2","3","4","5","6","7","8","9",
    "10","11","12","13","14","15","16","17"])"),
        400, "stop", "invalid_value");
  Fails(With("presence_penalty", "3"), 400, "presence_penalty", "invalid_value");
  Fails(With("frequency_penalty", "-2.5"), 400, "frequency_penalty", "invalid_value");
  Fails(With("repetition_penalty", "0"), 400, "repetition_penalty", "invalid_value");
  Fails(With("logprobs", "1"), 400, "logprobs", "invalid_type");
  Fails(With("top_logprobs", "2"), 400, "top_logprobs", "invalid_value");  // logprobs off
  Fails(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", 400,
        "top_logprobs", "invalid_value");
  Fails(With("stream", "\"yes\""), 400, "stream", "invalid_type");
  Fails(With("stream_options", R"({"include_usage":true})"), 400, "stream_options",
        "invalid_value");
  Fails(
      R"({"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":1}})",
      400, "stream_options.include_usage", "invalid_type");
  Fails(With("stop_token_ids", "[-1]"), 400, "stop_token_ids[0]", "invalid_value");
  Fails(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2,"min_tokens":3})", 400,
        "min_tokens", "invalid_value");
  Fails(With("chat_template_kwargs", "[]"), 400, "chat_template_kwargs", "invalid_type");
  Fails(With("logit_bias", R"({"1000":10})"), 400, "logit_bias.1000", "invalid_value");
  Fails(With("logit_bias", R"({"-3":10})"), 400, "logit_bias.-3", "invalid_value");
  Fails(With("logit_bias", R"({"x":10})"), 400, "logit_bias.x", "invalid_value");
  Fails(With("logit_bias", R"({"5":"a"})"), 400, "logit_bias.5", "invalid_type");
  Fails(With("logit_bias", R"({"5":1,"05":2})"), 400, "logit_bias", "invalid_value");
  Fails(With("logit_bias", "[5]"), 400, "logit_bias", "invalid_type");
  Fails(With("response_format", R"({"type":"xml"})"), 400, "response_format.type", "invalid_value");
  Fails(With("response_format", R"({"type":"json_schema"})"), 400, "response_format.json_schema",
        "missing_required_parameter");
  Fails(With("response_format", R"({"type":"json_schema","json_schema":{"name":"a","schema":3}})"),
        400, "response_format.json_schema.schema", "invalid_type");
  Fails(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},
    "guided_regex":"a+"})",
        400, "guided_regex", "invalid_value");
  Fails(With("guided_choice", "[]"), 400, "guided_choice", "invalid_value");
  Fails(With("structured_outputs", R"({"regex":""})"), 400, "structured_outputs.regex",
        "invalid_value");
  Fails(With("best_of", "3"), 400, "best_of", "unsupported_value");
  Fails(With("n", "17"), 400, "n", "invalid_value");
  Fails(With("n", "0"), 400, "n", "invalid_value");
  Fails(R"({"messages":[{"role":"user","content":"x"}],"n":2,"best_of":3})", 400, "best_of",
        "unsupported_value");
  CHECK(Parse(With("n", "3")).sampling.n == 3);
  CHECK(Parse(R"({"messages":[{"role":"user","content":"x"}],"n":4,"best_of":4})").sampling.n == 4);
  Fails(With("user", "1"), 400, "user", "invalid_type");
}

TEST_CASE("structured outputs: response_format, structured_outputs and guided_* fields") {
  using Kind = StructuredConstraint::Kind;
  CHECK(!Parse(With("response_format", R"({"type":"text"})")).sampling.structured);
  auto c = Parse(With("response_format", R"({"type":"json_object"})")).sampling.structured;
  REQUIRE(c);
  CHECK(c->kind == Kind::kJsonObject);
  c = Parse(With("response_format", R"({"type":"json_schema","json_schema":{"name":"w",
    "schema":{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}},
    "strict":true}})"))
          .sampling.structured;
  REQUIRE(c);
  CHECK(c->kind == Kind::kJsonSchema);
  CHECK(c->strict);
  // Key order is kept: the grammar writes properties in the schema's order.
  CHECK(c->text ==
        R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})");
  c = Parse(With("guided_json", R"("{\"type\":\"integer\"}")")).sampling.structured;
  REQUIRE(c);
  CHECK(c->text == R"({"type":"integer"})");
  c = Parse(With("structured_outputs", R"({"choice":["yes","no"]})")).sampling.structured;
  REQUIRE(c);
  CHECK(c->kind == Kind::kChoice);
  CHECK(c->choices == std::vector<std::string>{"yes", "no"});
  c = Parse(With("guided_regex", R"("[a-z]+")")).sampling.structured;
  REQUIRE(c);
  CHECK(c->kind == Kind::kRegex);
  c = Parse(With("guided_grammar", R"("root ::= \"a\"")")).sampling.structured;
  REQUIRE(c);
  CHECK(c->kind == Kind::kGrammar);
}

TEST_CASE("logit_bias: token ids to biases, clamped to [-100, 100], ascending id") {
  const ChatRequest r = Parse(With("logit_bias", R"({"7":-250,"3":0.5,"999":101})"));
  REQUIRE(r.sampling.logit_bias.size() == 3);
  CHECK(r.sampling.logit_bias[0] == std::pair<int32_t, float>{3, 0.5f});
  CHECK(r.sampling.logit_bias[1] == std::pair<int32_t, float>{7, -100.0f});
  CHECK(r.sampling.logit_bias[2] == std::pair<int32_t, float>{999, 100.0f});
  CHECK(Parse(With("logit_bias", "null")).sampling.logit_bias.empty());
  CHECK(Parse(With("logit_bias", "{}")).sampling.logit_bias.empty());
}

TEST_CASE("ResolveMaxTokens fits the completion into the context") {
  SamplingRequest s;
  CHECK(ResolveMaxTokens(s, 96, 100) == 4);
  s.max_tokens = 4;
  CHECK(ResolveMaxTokens(s, 96, 100) == 4);
  CHECK(ResolveMaxTokens(s, 96, 0) == 4);
  auto code = [](const SamplingRequest& r, size_t prompt, int64_t len) -> std::string {
    try {
      ResolveMaxTokens(r, prompt, len);
    } catch (const RequestError& e) {
      CHECK(e.http_status() == 400);
      return e.error_code();
    }
    return "";
  };
  CHECK(code(s, 97, 100) == "context_length_exceeded");
  CHECK(code(s, 100, 100) == "context_length_exceeded");
  CHECK(code(SamplingRequest{}, 5, 0) == "missing_required_parameter");
  // The field blamed for a prompt too long: chat's messages unless the caller names another.
  auto param = [](size_t prompt, const std::string& name) -> std::string {
    try {
      if (name.empty()) {
        ResolveMaxTokens(SamplingRequest{}, prompt, 100);
      } else {
        ResolveMaxTokens(SamplingRequest{}, prompt, 100, name);
      }
    } catch (const RequestError& e) {
      return e.param();
    }
    return "";
  };
  CHECK(param(100, "") == "messages");
  CHECK(param(100, "prompt") == "prompt");
}

TEST_CASE("error bodies stay valid JSON for any bytes") {
  const auto body = ErrorBody(400, "bad \xff byte", std::string("p\xfe"), "invalid_value");
  CHECK(body["error"]["message"] == "bad \xEF\xBF\xBD byte");
  CHECK(body["error"]["param"] == "p\xEF\xBF\xBD");
  CHECK_FALSE(body.dump().empty());
}

TEST_CASE("chat_template_kwargs: checked, merged over the server's defaults") {
  ChatRequest r = Parse(With("chat_template_kwargs", R"({"thinking_mode":"enabled","x":[1]})"));
  CHECK(r.chat_template_kwargs.dump() == R"({"thinking_mode":"enabled","x":[1]})");
  CHECK(r.ToPromptInput().extra_context.dump() == R"({"thinking_mode":"enabled","x":[1]})");
  // The request's keys over the defaults, one by one; a null unsets a default.
  const Json defaults = Json::parse(R"({"thinking_mode":"disabled","model_identity":"M"})");
  CHECK(r.ToPromptInput(defaults).extra_context.dump() ==
        R"({"thinking_mode":"enabled","model_identity":"M","x":[1]})");
  CHECK(Parse(With("chat_template_kwargs", R"({"thinking_mode":null})"))
            .ToPromptInput(defaults)
            .extra_context.dump() == R"({"model_identity":"M"})");
  CHECK(Parse(With("seed", "1")).ToPromptInput(defaults).extra_context == defaults);
  for (const char* mode : {"enabled", "disabled", "adaptive"}) {
    CHECK(Parse(With("chat_template_kwargs", Cat({R"({"thinking_mode":")", mode, "\"}"})))
              .chat_template_kwargs["thinking_mode"] == mode);
  }

  Fails(With("chat_template_kwargs", "\"enabled\""), 400, "chat_template_kwargs", "invalid_type");
  Fails(With("chat_template_kwargs", "[]"), 400, "chat_template_kwargs", "invalid_type");
  const std::string msg = Fails(With("chat_template_kwargs", R"({"thinking_mode":"on"})"), 400,
                                "chat_template_kwargs.thinking_mode", "invalid_value");
  CHECK(msg.find("\"on\"") != std::string::npos);
  CHECK(msg.find("adaptive") != std::string::npos);
  Fails(With("chat_template_kwargs", R"({"thinking_mode":true})"), 400,
        "chat_template_kwargs.thinking_mode", "invalid_type");
  Fails(With("chat_template_kwargs", R"({"model_identity":{}})"), 400,
        "chat_template_kwargs.model_identity", "invalid_type");
}

TEST_CASE("assistant reasoning in history reaches the template as reasoning_content") {
  const ChatRequest r = Parse(R"({"messages":[{"role":"user","content":"a"},
    {"role":"assistant","content":"b","reasoning":"thought 1"},
    {"role":"user","content":"c"},
    {"role":"assistant","content":"d","reasoning_content":"thought 2","reasoning":"other"},
    {"role":"assistant","content":"e","reasoning_content":null,"reasoning":"thought 3"},
    {"role":"user","content":"f"}]})");
  const Json m = r.ToPromptInput().messages;
  CHECK(m[1]["reasoning_content"] == "thought 1");
  CHECK(m[3]["reasoning_content"] == "thought 2");  // the explicit field wins
  CHECK(m[4]["reasoning_content"] == "thought 3");
  CHECK_FALSE(m[0].contains("reasoning_content"));

  Fails(R"({"messages":[{"role":"assistant","content":"x","reasoning_content":5}]})", 400,
        "messages[0].reasoning_content", "invalid_type");
  const std::string msg =
      Fails(R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"x",
      "reasoning":["a"]}]})",
            400, "messages[1].reasoning", "invalid_type");
  CHECK(msg.find("messages[1].reasoning") != std::string::npos);
}

TEST_CASE("assistant tool calls reach the template with object arguments") {
  const ChatRequest r = Parse(R"({"messages":[{"role":"user","content":"a"},
    {"role":"assistant","content":null,"tool_calls":[
      {"id":"c0","type":"function","function":{"name":"f","arguments":"{\"city\":\"Paris\",\"n\":[1,2]}"}},
      {"id":"c1","type":"function","function":{"name":"g","arguments":{"x":true}}},
      {"id":"c2","type":"function","function":{"name":"h","arguments":" "}}]},
    {"role":"tool","tool_call_id":"c0","content":"ok"}]})");
  const Json calls = r.ToPromptInput().messages[1]["tool_calls"];
  CHECK(calls[0]["function"]["arguments"].dump() == R"({"city":"Paris","n":[1,2]})");
  CHECK(calls[1]["function"]["arguments"].dump() == R"({"x":true})");
  CHECK(calls[2]["function"]["arguments"].dump() == "{}");

  Fails(
      R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":"}}]}]})",
      400, "messages[0].tool_calls[0].function.arguments", "invalid_value");
  Fails(
      R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}]})",
      400, "messages[0].tool_calls[0].function.arguments", "invalid_value");
}
