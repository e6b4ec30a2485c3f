// OutputParser: the whole chain on real token ids of the MiniMax test tokenizer: reasoning,
// tool calls, stop strings and stop tokens, streamed token by token.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/text/output_parser.h"
#include "tests/test_util.h"

using m3::text::FinishReason;
using m3::text::OutputDelta;
using m3::text::OutputParser;
using m3::text::OutputParserOptions;
using m3::tok::Tokenizer;
using Json = nlohmann::ordered_json;

namespace {

const Tokenizer& Tok() {
  static const Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  return tok;
}

OutputParserOptions Options() {
  OutputParserOptions o;
  o.stop.stop_token_ids = {*Tok().TokenToId("[e~[")};
  o.make_tool_call_id = [](size_t i) { return "call_" + std::to_string(i); };
  return o;
}

struct Collected {
  std::string content, reasoning;
  std::vector<m3::text::ToolCall> calls;
  std::optional<FinishReason> finish;
  size_t deltas_with_text = 0;
};

// Feeds the ids one by one (then Finish(kLength) if not finished) and checks that the
// concatenated deltas equal the parser's accumulated result.
Collected Run(OutputParser& p, const std::vector<int32_t>& ids) {
  Collected c;
  auto take = [&](OutputDelta d) {
    c.deltas_with_text += !d.content.empty() || !d.reasoning_content.empty();
    c.content += d.content;
    c.reasoning += d.reasoning_content;
    for (auto& call : d.tool_calls) c.calls.push_back(call);
    if (d.finish_reason) c.finish = d.finish_reason;
  };
  for (int32_t id : ids) take(p.Step(id));
  take(p.Finish(FinishReason::kLength));
  CHECK(c.content == p.result().content);
  CHECK(c.reasoning == p.result().reasoning_content);
  CHECK(c.calls.size() == p.result().tool_calls.size());
  CHECK(c.finish == p.result().finish_reason);
  return c;
}

std::vector<int32_t> Ids(const std::string& text) {
  return Tok().Encode(text, false);
}

}  // namespace

TEST_CASE("reasoning, then content, then the end-of-turn token") {
  OutputParser p(Tok(), Options());
  auto c = Run(p, Ids("The user greets me 👋.\n</think>\n\nHello! 你好[e~[ignored"));
  CHECK(c.reasoning == "The user greets me 👋.");
  CHECK(c.content == "Hello! 你好");
  CHECK(c.finish == FinishReason::kStop);
  CHECK(p.result().stop_token_id == *Tok().TokenToId("[e~["));
  CHECK(c.deltas_with_text > 3);
}

TEST_CASE("tool calls with schema types end with finish_reason tool_calls") {
  auto o = Options();
  o.parse_tool_calls = true;
  o.tools = Json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":
      {"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])");
  OutputParser p(Tok(), o);
  auto c = Run(p, Ids("Need weather.</think>\n\nChecking.\n<minimax:tool_call>\n"
                      "<invoke name=\"get_weather\">\n<parameter name=\"city\">São Paulo"
                      "</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n"
                      "</minimax:tool_call>[e~["));
  CHECK(c.reasoning == "Need weather.");
  CHECK(c.content == "Checking.\n");
  REQUIRE(c.calls.size() == 1);
  CHECK(c.calls[0].name == "get_weather");
  CHECK(Json::parse(c.calls[0].arguments) == Json{{"city", "São Paulo"}, {"days", 3}});
  CHECK(c.finish == FinishReason::kToolCalls);
}

TEST_CASE("without tool parsing the tags are plain content; skip_special_tokens off") {
  auto o = Options();
  o.parse_reasoning = false;
  o.skip_special_tokens = false;
  OutputParser p(Tok(), o);
  auto c = Run(p, Ids("a</think><minimax:tool_call>b"));
  CHECK(c.content == "a</think><minimax:tool_call>b");
  CHECK(c.finish == FinishReason::kLength);
}

TEST_CASE("stop strings across tokens; the withheld prefix comes back at the end") {
  auto o = Options();
  o.parse_reasoning = false;
  o.stop.stop_strings = {"STOP here", "Zq"};
  {
    OutputParser p(Tok(), o);
    auto c = Run(p, Ids("Some text STOP here and more"));
    CHECK(c.content == "Some text ");
    CHECK(c.finish == FinishReason::kStop);
    CHECK(p.result().stop_string == "STOP here");
  }
  {
    OutputParser p(Tok(), o);
    auto c = Run(p, Ids("Ends with STOP her"));  // cut by max_tokens: nothing is lost
    CHECK(c.content == "Ends with STOP her");
    CHECK(c.finish == FinishReason::kLength);
  }
  {
    o.stop.include_stop_str_in_output = true;
    OutputParser p(Tok(), o);
    auto c = Run(p, Ids("xZq tail"));
    CHECK(c.content == "xZq");
  }
}

TEST_CASE("stop string inside the reasoning still ends the output") {
  auto o = Options();
  o.stop.stop_strings = {"ABORT"};
  OutputParser p(Tok(), o);
  auto c = Run(p, Ids("thinking ABORT</think>\n\ncontent"));
  CHECK(c.reasoning == "thinking ");
  CHECK(c.content == "");
  CHECK(c.finish == FinishReason::kStop);
}

TEST_CASE("ids after the end are ignored; a span of ids is one step") {
  OutputParser p(Tok(), Options());
  auto ids = Ids("r</think>ok[e~[more text");
  OutputDelta d = p.Step(std::span<const int32_t>(ids));
  CHECK(d.reasoning_content == "r");
  CHECK(d.content == "ok");
  CHECK(d.finish_reason == FinishReason::kStop);
  CHECK(p.finished());
  CHECK(p.Step(ids[0]).empty());
  CHECK(p.Finish(FinishReason::kLength).empty());
  CHECK(p.result().num_tokens == ids.size() - Ids("more text").size());
}
