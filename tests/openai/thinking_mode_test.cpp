// Thinking modes and interleaved thinking through a chat request and the real MiniMax-M3
// template (tests/data/m3-chat/model): chat_template_kwargs.thinking_mode, over the server's
// defaults, picks the generation prompt and so where the output parser starts; earlier turns'
// reasoning and tool calls (arguments sent as JSON text) are rendered back.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gateway/openai/chat_request.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"
#include "gateway/template/chat_template.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/prompt_builder.h"
#include "tests/test_util.h"

using namespace m3;
using openai::Json;

namespace {

const std::string kModel = test::DataPath("m3-chat/model");

const text::PromptBuilder& Builder() {
  static const text::PromptBuilder b = text::PromptBuilder::FromModelDir(kModel);
  return b;
}

const text::ChatFormat& Format() {
  static const text::ChatFormat f = text::DetectChatFormat(tmpl::LoadChatTemplateSource(kModel));
  return f;
}

openai::ChatRequest Parse(const std::string& body) {
  openai::ServedModel model;
  model.name = "m3-chat";
  return openai::ParseChatRequest(openai::ParseRequestBody(body, {}), model, {});
}

std::string Body(const std::string& kwargs) {
  std::string b = R"({"messages":[{"role":"user","content":"hi"}])";
  if (!kwargs.empty()) b += R"(,"chat_template_kwargs":)" + kwargs;
  return b + "}";
}

std::string Render(const openai::ChatRequest& r, const Json& defaults = Json::object()) {
  return Builder().Build(r.ToPromptInput(defaults), {}).rendered;
}

}  // namespace

TEST_CASE("the M3 template's format is detected") {
  REQUIRE(Format().reasoning == text::ReasoningSyntax::kMiniMaxM3);
  REQUIRE(Format().tool_calls == text::ToolCallSyntax::kMiniMaxM3);
}

TEST_CASE("thinking_mode picks the generation prompt and the parser's start") {
  struct Case {
    std::string kwargs, tail, mode;
    bool in_reasoning;
  };
  const std::vector<Case> cases = {
      {R"({"thinking_mode":"enabled"})", "]~b]ai\n<mm:think>", "enabled", true},
      {R"({"thinking_mode":"disabled"})", "]~b]ai\n</mm:think>", "disabled", false},
      {R"({"thinking_mode":"adaptive"})", "]~b]ai\n", "adaptive", false},
      {"", "]~b]ai\n", "adaptive", false},
  };
  const std::vector<int64_t> eos = {200020};
  for (const Case& c : cases) {
    CAPTURE(c.kwargs);
    const openai::ChatRequest req = Parse(Body(c.kwargs));
    const std::string rendered = Render(req);
    CHECK(rendered.ends_with(c.tail));
    CHECK(rendered.find("Current thinking mode: " + c.mode + ".") != std::string::npos);
    const text::OutputParserOptions o = openai::ChatOutputOptions(req, eos, rendered, Format());
    CHECK(o.parse_reasoning);
    CHECK(o.reasoning.start_tag == "<mm:think>");
    CHECK(o.reasoning.end_tag == "</mm:think>");
    CHECK(o.reasoning.drop_leading_end_tag);
    CHECK(o.reasoning.starts_in_reasoning == c.in_reasoning);
    CHECK(o.hide_kept_special_tokens);
    CHECK_FALSE(o.parse_tool_calls);  // no tools in the request
  }
}

TEST_CASE("the server's default kwargs apply unless the request overrides them") {
  const Json defaults = Json::parse(R"({"thinking_mode":"enabled"})");
  CHECK(Render(Parse(Body("")), defaults).ends_with("]~b]ai\n<mm:think>"));
  CHECK(Render(Parse(Body(R"({"thinking_mode":"disabled"})")), defaults)
            .ends_with("]~b]ai\n</mm:think>"));
  // null unsets the default: the template's own (adaptive).
  const std::string unset = Render(Parse(Body(R"({"thinking_mode":null})")), defaults);
  CHECK(unset.ends_with("]~b]ai\n"));
  CHECK(unset.find("Current thinking mode: adaptive.") != std::string::npos);
}

TEST_CASE("tools select the M3 tool-call parser with the request's schema") {
  const openai::ChatRequest req = Parse(
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":
      {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]})");
  const std::string rendered = Render(req);
  CHECK(rendered.find("get_weather") != std::string::npos);
  const std::vector<int64_t> eos = {200020};
  const text::OutputParserOptions o = openai::ChatOutputOptions(req, eos, rendered, Format());
  CHECK(o.parse_tool_calls);
  CHECK(o.tool_format.syntax == text::ToolCallSyntax::kMiniMaxM3);
  CHECK(o.tools == req.tools);
}

TEST_CASE("earlier turns' reasoning and tool calls are rendered back") {
  const openai::ChatRequest req = Parse(R"({"messages":[
    {"role":"user","content":"weather in Paris?"},
    {"role":"assistant","content":"","reasoning_content":"I should call the tool.",
     "tool_calls":[{"id":"call_1","type":"function",
       "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":3}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sunny"},
    {"role":"assistant","content":"Sunny.","reasoning":"The tool said sunny."},
    {"role":"assistant","content":"No reasoning here."},
    {"role":"user","content":"thanks"}],
    "chat_template_kwargs":{"thinking_mode":"enabled"}})");
  const std::string r = Render(req);
  const std::string ns = "]<]minimax[>[";
  CHECK(r.find("]~b]ai\n<mm:think>I should call the tool.</mm:think>" + ns + "<tool_call>\n" + ns +
               "<invoke name=\"get_weather\">" + ns + "<city>Paris" + ns + "</city>" + ns +
               "<days>3" + ns + "</days>" + ns + "</invoke>\n" + ns + "</tool_call>[e~[\n") !=
        std::string::npos);
  CHECK(r.find("<response>sunny</response>") != std::string::npos);
  CHECK(r.find("]~b]ai\n<mm:think>The tool said sunny.</mm:think>Sunny.[e~[\n") !=
        std::string::npos);
  CHECK(r.find("]~b]ai\n</mm:think>No reasoning here.[e~[\n") != std::string::npos);
  CHECK(r.ends_with("]~b]ai\n<mm:think>"));
}
