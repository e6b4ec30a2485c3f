// Anthropic Messages bodies: valid requests become the internal chat request the OpenAI path
// serves (and render through the real chat templates), every invalid field is refused with the
// right status and the Anthropic field path.
#include <doctest/doctest.h>

#include <string>

#include "gateway/anthropic/error_body.h"
#include "gateway/anthropic/messages_request.h"
#include "gateway/openai/request_body.h"
#include "gateway/text/prompt_builder.h"
#include "tests/test_util.h"

using namespace m3::anthropic;
using m3::openai::ApiLimits;
using m3::openai::RequestError;
using m3::openai::ServedModel;

namespace {

ServedModel Model() {
  ServedModel m;
  m.name = "m3";
  m.generation.temperature = 0.7;
  m.generation.top_k = 40;
  return m;
}

MessagesRequest Parse(const std::string& body,
                      MessagesEndpoint endpoint = MessagesEndpoint::kCreate,
                      const ApiLimits& limits = {}) {
  return ParseMessagesRequest(m3::openai::ParseRequestBody(body, limits), Model(), limits,
                              endpoint);
}

// A valid body with the raw JSON `extra` fields added.
std::string Body(const std::string& messages, const std::string& extra = "") {
  std::string b = R"({"model":"m3","max_tokens":64,"messages":)" + messages;
  if (!extra.empty()) b += "," + extra;
  return b + "}";
}

const char* kHi = R"([{"role":"user","content":"hi"}])";

// Parses `body`, which must fail with `status` naming `param`; returns the message.
std::string Fails(const std::string& body, int status, const std::string& param,
                  MessagesEndpoint endpoint = MessagesEndpoint::kCreate,
                  const ApiLimits& limits = {}) {
  try {
    Parse(body, endpoint, limits);
  } catch (const RequestError& e) {
    CHECK_MESSAGE(e.http_status() == status, body, ": ", e.what());
    CHECK_MESSAGE(e.param() == param, body, ": ", e.what());
    // The message names the field, as Anthropic's error has no param of its own.
    if (!param.empty())
      CHECK_MESSAGE(std::string(e.what()).find(param) != std::string::npos, e.what());
    const auto err = ErrorBody(e.http_status(), e.what());
    CHECK(err["type"] == "error");
    CHECK(err["error"]["type"] == std::string(ErrorType(status)));
    CHECK(err["error"]["message"] == std::string(e.what()));
    return e.what();
  }
  FAIL("no error for ", body);
  return "";
}

}  // namespace

TEST_CASE("a text request becomes the chat request, with the model's defaults") {
  const MessagesRequest r = Parse(Body(kHi));
  const auto& c = r.chat;
  CHECK(c.model == "m3");
  CHECK(c.messages.dump() == R"([{"role":"user","content":"hi"}])");
  CHECK(c.media.empty());
  CHECK(c.tools.is_null());
  CHECK(c.sampling.max_tokens == 64);
  CHECK(c.sampling.temperature == doctest::Approx(0.7));
  CHECK(c.sampling.top_k == 40);
  CHECK(c.sampling.stop.empty());
  CHECK_FALSE(c.stream.stream);
  CHECK_FALSE(r.thinking.has_value());
  CHECK(c.chat_template_kwargs.empty());
  CHECK(c.add_generation_prompt);
}

TEST_CASE("system, sampling fields, stop_sequences, stream, metadata, thinking") {
  MessagesRequest r = Parse(Body(kHi, R"("system":"Be brief.","temperature":0.2,"top_p":0.9,
      "top_k":5,"stop_sequences":["END","\n\n"],"stream":true,"metadata":{"user_id":"u1"},
      "thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2048)"));
  const auto& c = r.chat;
  CHECK(c.messages.dump() ==
        R"([{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}])");
  CHECK(c.sampling.temperature == doctest::Approx(0.2));
  CHECK(c.sampling.top_p == doctest::Approx(0.9));
  CHECK(c.sampling.top_k == 5);
  CHECK(c.sampling.max_tokens == 2048);
  CHECK(c.sampling.stop == std::vector<std::string>{"END", "\n\n"});
  CHECK(c.stream.stream);
  CHECK_FALSE(c.stream.include_usage);
  CHECK(r.thinking == true);
  CHECK(c.chat_template_kwargs.dump() == R"({"thinking_mode":"enabled"})");

  r = Parse(Body(kHi, R"("system":[{"type":"text","text":"One."},{"type":"text","text":"Two.",
      "cache_control":{"type":"ephemeral"}}],"thinking":{"type":"disabled"})"));
  CHECK(r.chat.messages[0].dump() == R"({"role":"system","content":"One.\nTwo."})");
  CHECK(r.thinking == false);
  CHECK(r.chat.chat_template_kwargs.dump() == R"({"thinking_mode":"disabled"})");
  // An empty system prompt adds no message.
  CHECK(Parse(Body(kHi, R"("system":"")")).chat.messages.size() == 1);
}

TEST_CASE("images by base64 and by url, in user messages and tool results, in prompt order") {
  const MessagesRequest r = Parse(Body(R"([
    {"role":"user","content":[{"type":"text","text":"Look:"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
    {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"snap","input":{}}]},
    {"role":"user","content":[{"type":"text","text":"and this"},
      {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"took it"},
        {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]},
      {"type":"image","source":{"type":"url","url":"https://example.com/b.jpg"}}]}])"));
  const auto& c = r.chat;
  REQUIRE(c.media.size() == 3);
  CHECK(c.media[0].url == "data:image/png;base64,iVBORw0KGgo=");
  CHECK(c.media[0].param == "messages[0].content[1].source.data");
  // The tool result's image follows the tool results, in the user message (chat templates
  // take images in user turns), ahead of the turn's own blocks.
  CHECK(c.media[1].url == "https://example.com/a.jpg");
  CHECK(c.media[1].param == "messages[2].content[1].content[1].source.url");
  CHECK(c.media[2].url == "https://example.com/b.jpg");
  CHECK(c.media[2].param == "messages[2].content[2].source.url");
  REQUIRE(c.messages.size() == 4);
  CHECK(c.messages[0]["content"][1].dump() ==
        R"({"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}})");
  CHECK(c.messages[2].dump() ==
        R"({"role":"tool","tool_call_id":"toolu_1","content":[{"type":"text","text":"took it"}]})");
  CHECK(
      c.messages[3].dump() ==
      R"({"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}},{"type":"text","text":"and this"},{"type":"image_url","image_url":{"url":"https://example.com/b.jpg"}}]})");
  // A tool result of an image alone: the tool message has no text.
  const MessagesRequest only = Parse(Body(R"([{"role":"user","content":[{"type":"tool_result",
      "tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}])"));
  CHECK(
      only.chat.messages.dump() ==
      R"([{"role":"tool","tool_call_id":"t","content":""},{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}])");
  // The media list is what prompt assembly finds in the translated messages.
  const auto parts = m3::text::FindMediaParts(c.messages);
  REQUIRE(parts.size() == c.media.size());
  for (size_t i = 0; i < parts.size(); ++i) CHECK(parts[i].url == c.media[i].url);
}

TEST_CASE("tools, tool_use and tool_result, thinking history") {
  const MessagesRequest r = Parse(Body(R"([
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool.","signature":"s"},
      {"type":"redacted_thinking","data":"xx"},
      {"type":"text","text":"Checking."},
      {"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris","days":3}},
      {"type":"tool_use","id":"toolu_b","name":"get_weather","input":{"city":"Nice"}}]},
    {"role":"user","content":[
      {"type":"tool_result","tool_use_id":"toolu_a","content":"sunny"},
      {"type":"tool_result","tool_use_id":"toolu_b","is_error":true}]}])",
                                       R"("tools":[{"name":"get_weather","description":"Weather.",
      "input_schema":{"type":"object","properties":{"city":{"type":"string"}}},
      "cache_control":{"type":"ephemeral"}},{"type":"custom","name":"noop","input_schema":{}}],
      "tool_choice":{"type":"auto","disable_parallel_tool_use":true})"));
  const auto& c = r.chat;
  CHECK(c.tool_choice == m3::openai::ToolChoice::kAuto);
  CHECK(c.parse_tool_calls());
  CHECK(
      c.tools.dump() ==
      R"([{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"noop","parameters":{}}}])");
  REQUIRE(c.messages.size() == 4);
  CHECK(
      c.messages[1].dump() ==
      R"({"role":"assistant","content":"Checking.","reasoning_content":"Use the tool.","tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","days":3}}},{"id":"toolu_b","type":"function","function":{"name":"get_weather","arguments":{"city":"Nice"}}}]})");
  CHECK(c.messages[2].dump() == R"({"role":"tool","tool_call_id":"toolu_a","content":"sunny"})");
  CHECK(c.messages[3].dump() == R"({"role":"tool","tool_call_id":"toolu_b","content":""})");

  // tool_choice none drops the tools, as the OpenAI path does.
  const MessagesRequest none = Parse(Body(kHi, R"("tools":[{"name":"t","input_schema":{}}],
      "tool_choice":{"type":"none"})"));
  CHECK(none.chat.tools.is_null());
  CHECK_FALSE(none.chat.parse_tool_calls());
}

TEST_CASE("count_tokens takes no max_tokens and allows a final assistant message") {
  const MessagesRequest r = Parse(R"({"model":"m3","messages":[{"role":"user","content":"a"},
        {"role":"assistant","content":"b"}],"thinking":{"type":"enabled","budget_tokens":2000}})",
                                  MessagesEndpoint::kCountTokens);
  CHECK(r.chat.messages.size() == 2);
  CHECK(r.chat.chat_template_kwargs["thinking_mode"] == "enabled");
}

TEST_CASE("the translated request renders through the real templates") {
  const std::string body = Body(R"([
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool."},
      {"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"sunny"},
      {"type":"text","text":"Thanks"}]}])",
                                R"("system":"Be brief.","thinking":{"type":"enabled",
      "budget_tokens":1024},"max_tokens":4096,"tools":[{"name":"get_weather",
      "input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}])");
  const MessagesRequest r = Parse(body);
  {
    const auto b = m3::text::PromptBuilder::FromModelDir(m3::test::DataPath("m3-chat/model"));
    const std::string p = b.Build(r.chat.ToPromptInput(), {}).rendered;
    CHECK(p.find("Be brief.") != std::string::npos);
    CHECK(p.find("get_weather") != std::string::npos);
    CHECK(p.find("Paris") != std::string::npos);
    CHECK(p.find("<response>sunny</response>") != std::string::npos);
    CHECK(p.find("Thanks") != std::string::npos);
    // thinking enabled: the generation prompt opens the reasoning.
    CHECK(p.substr(p.size() - std::string("<mm:think>").size()) == "<mm:think>");
  }
  {
    const auto b = m3::text::PromptBuilder::FromModelDir(m3::test::DataPath("demo-model/model"));
    const std::string p = b.Build(r.chat.ToPromptInput(), {}).rendered;
    CHECK(p.find("<invoke name=\"get_weather\">") != std::string::npos);
    CHECK(p.find("sunny") != std::string::npos);
  }
}

TEST_CASE("bad input: 400 naming the field") {
  Fails("[]", 400, "");
  Fails(R"({"max_tokens":5,"messages":[{"role":"user","content":"hi"}]})", 400, "model");
  Fails(R"({"model":"m3","messages":[{"role":"user","content":"hi"}]})", 400, "max_tokens");
  Fails(Body(kHi, R"("max_tokens":0)"), 400, "max_tokens");
  Fails(Body(kHi, R"("max_tokens":"5")"), 400, "max_tokens");
  Fails(R"({"model":"m3","max_tokens":5})", 400, "messages");
  Fails(Body("[]"), 400, "messages");
  Fails(Body(R"({"role":"user"})"), 400, "messages");
  Fails(Body(R"([{"role":"system","content":"x"}])"), 400, "messages[0].role");
  Fails(Body(R"([{"role":"user"}])"), 400, "messages[0].content");
  Fails(Body(R"([{"role":"user","content":7}])"), 400, "messages[0].content");
  Fails(Body(R"([{"role":"user","content":[]}])"), 400, "messages[0].content");
  Fails(Body(R"([{"role":"user","content":["x"]}])"), 400, "messages[0].content[0]");
  Fails(Body(R"([{"role":"user","content":[{"text":"x"}]}])"), 400, "messages[0].content[0].type");
  Fails(Body(R"([{"role":"user","content":[{"type":"text"}]}])"), 400,
        "messages[0].content[0].text");
  Fails(Body(R"([{"role":"user","content":[{"type":"text","text":1}]}])"), 400,
        "messages[0].content[0].text");
  Fails(Body(R"([{"role":"user","content":[{"type":"document","source":{}}]}])"), 400,
        "messages[0].content[0].type");
  Fails(Body(R"([{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}])"),
        400, "messages[0].content[0].type");
  // Images.
  Fails(Body(R"([{"role":"user","content":[{"type":"image"}]}])"), 400,
        "messages[0].content[0].source");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}])"),
      400, "messages[0].content[0].source.type");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA=="}}]}])"),
      400, "messages[0].content[0].source.media_type");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}])"),
      400, "messages[0].content[0].source.data");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}]}])"),
      400, "messages[0].content[0].source.data");
  Fails(Body(R"([{"role":"user","content":[{"type":"image","source":{"type":"url","url":""}}]}])"),
        400, "messages[0].content[0].source.url");
  Fails(Body(R"([{"role":"user","content":[{"type":"image","source":{"type":"url"}}]}])"), 400,
        "messages[0].content[0].source.url");
  // Tool results.
  Fails(Body(R"([{"role":"user","content":[{"type":"tool_result","content":"x"}]}])"), 400,
        "messages[0].content[0].tool_use_id");
  Fails(
      Body(R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":5}]}])"),
      400, "messages[0].content[0].content");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_result"}]}]}])"),
      400, "messages[0].content[0].content[0].type");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":"yes"}]}])"),
      400, "messages[0].content[0].is_error");
  Fails(
      Body(
          R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"base64","media_type":"image/tiff","data":"AA=="}}]}]}])"),
      400, "messages[0].content[0].content[0].source.media_type");
  // Assistant blocks.
  const std::string tail = R"(,{"role":"user","content":"go"}])";
  Fails(
      Body(
          R"([{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]})" +
          tail),
      400, "messages[0].content[0].type");
  Fails(
      Body(R"([{"role":"assistant","content":[{"type":"tool_use","name":"b","input":{}}]})" + tail),
      400, "messages[0].content[0].id");
  Fails(Body(R"([{"role":"assistant","content":[{"type":"tool_use","id":"a","input":{}}]})" + tail),
        400, "messages[0].content[0].name");
  Fails(Body(R"([{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b"}]})" + tail),
        400, "messages[0].content[0].input");
  Fails(
      Body(
          R"([{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":"{}"}]})" +
          tail),
      400, "messages[0].content[0].input");
  Fails(Body(R"([{"role":"assistant","content":[{"type":"thinking"}]})" + tail), 400,
        "messages[0].content[0].thinking");
  // A final assistant message (prefill) is refused, not silently answered as a new turn.
  Fails(Body(R"([{"role":"user","content":"a"},{"role":"assistant","content":"{"}])"), 400,
        "messages[1].role");
  // System.
  Fails(Body(kHi, R"("system":5)"), 400, "system");
  Fails(Body(kHi, R"("system":[{"type":"image","source":{}}])"), 400, "system[0].type");
  Fails(Body(kHi, R"("system":[{"type":"text"}])"), 400, "system[0].text");
  // Sampling.
  Fails(Body(kHi, R"("temperature":1.5)"), 400, "temperature");
  Fails(Body(kHi, R"("temperature":"hot")"), 400, "temperature");
  Fails(Body(kHi, R"("top_p":0)"), 400, "top_p");
  Fails(Body(kHi, R"("top_k":-1)"), 400, "top_k");
  Fails(Body(kHi, R"("stop_sequences":"END")"), 400, "stop_sequences");
  Fails(Body(kHi, R"("stop_sequences":[1])"), 400, "stop_sequences[0]");
  Fails(Body(kHi, R"("stop_sequences":[""])"), 400, "stop_sequences[0]");
  Fails(Body(kHi, R"("stop_sequences":[")" + std::string(2000, 'x') + "\"]"), 400,
        "stop_sequences[0]");
  Fails(
      Body(
          kHi,
          R"("stop_sequences":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"),
      400, "stop_sequences");
  Fails(Body(kHi, R"("stream":"yes")"), 400, "stream");
  Fails(Body(kHi, R"("metadata":"x")"), 400, "metadata");
  Fails(Body(kHi, R"("metadata":{"user_id":5})"), 400, "metadata.user_id");
  // Thinking.
  Fails(Body(kHi, R"("thinking":true)"), 400, "thinking");
  Fails(Body(kHi, R"("thinking":{"type":"on"})"), 400, "thinking.type");
  Fails(Body(kHi, R"("thinking":{"type":"enabled"})"), 400, "thinking.budget_tokens");
  Fails(Body(kHi, R"("thinking":{"type":"enabled","budget_tokens":100})"), 400,
        "thinking.budget_tokens");
  Fails(Body(kHi, R"("thinking":{"type":"enabled","budget_tokens":1024})"), 400,
        "thinking.budget_tokens");  // not less than max_tokens (64)
  // Tools.
  Fails(Body(kHi, R"("tools":{})"), 400, "tools");
  Fails(Body(kHi, R"("tools":[{"input_schema":{}}])"), 400, "tools[0].name");
  Fails(Body(kHi, R"("tools":[{"name":"","input_schema":{}}])"), 400, "tools[0].name");
  Fails(Body(kHi, R"("tools":[{"name":"t"}])"), 400, "tools[0].input_schema");
  Fails(Body(kHi, R"("tools":[{"name":"t","input_schema":[]}])"), 400, "tools[0].input_schema");
  Fails(Body(kHi, R"("tools":[{"type":"web_search_20250305","name":"web_search"}])"), 400,
        "tools[0].type");
  Fails(Body(kHi, R"("tool_choice":"auto")"), 400, "tool_choice");
  Fails(Body(kHi, R"("tool_choice":{})"), 400, "tool_choice.type");
  Fails(Body(kHi, R"("tool_choice":{"type":"maybe"})"), 400, "tool_choice.type");
  Fails(Body(kHi, R"("tool_choice":{"type":"any"})"), 400, "tool_choice");  // no tools
  Fails(Body(kHi, R"("tools":[{"name":"t","input_schema":{}}],"tool_choice":{"type":"tool"})"), 400,
        "tool_choice.name");
  Fails(Body(kHi, R"("tool_choice":{"type":"auto","disable_parallel_tool_use":1})"), 400,
        "tool_choice.disable_parallel_tool_use");
}

TEST_CASE("bad input: other statuses") {
  const std::string msg = Fails(Body(kHi, R"("model":"claude-x")"), 404, "model");
  CHECK(msg.find("claude-x") != std::string::npos);
  Fails(
      Body(kHi,
           R"("tools":[{"name":"t","input_schema":{}}],"tool_choice":{"type":"tool","name":"u"})"),
      422, "tool_choice.name");
  ApiLimits small;
  small.max_messages = 1;
  small.max_media_items = 1;
  small.max_tools = 1;
  Fails(Body(R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])"), 413, "messages",
        MessagesEndpoint::kCreate, small);
  const std::string image =
      R"({"type":"image","source":{"type":"url","url":"https://example.com/a.png"}})";
  Fails(Body("[{\"role\":\"user\",\"content\":[" + image + "," + image + "]}]"), 413, "messages",
        MessagesEndpoint::kCreate, small);
  Fails(Body(kHi, R"("tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{}}])"),
        413, "tools", MessagesEndpoint::kCreate, small);
  small.max_body_bytes = 10;
  Fails(Body(kHi), 413, "", MessagesEndpoint::kCreate, small);
  Fails("{not json", 400, "");
}

TEST_CASE("Anthropic error types by status") {
  CHECK(ErrorType(400) == "invalid_request_error");
  CHECK(ErrorType(415) == "invalid_request_error");
  CHECK(ErrorType(422) == "invalid_request_error");
  CHECK(ErrorType(401) == "authentication_error");
  CHECK(ErrorType(403) == "permission_error");
  CHECK(ErrorType(404) == "not_found_error");
  CHECK(ErrorType(413) == "request_too_large");
  CHECK(ErrorType(429) == "rate_limit_error");
  CHECK(ErrorType(500) == "api_error");
  CHECK(ErrorType(502) == "api_error");
  CHECK(ErrorType(504) == "api_error");
  CHECK(ErrorType(503) == "overloaded_error");
  CHECK(ErrorType(529) == "overloaded_error");
  // A client's invalid bytes quoted back still serialize.
  const auto body = ErrorBody(400, std::string("bad \xff byte"));
  CHECK(body.dump() ==
        "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad "
        "\xEF\xBF\xBD byte\"}}");
}
