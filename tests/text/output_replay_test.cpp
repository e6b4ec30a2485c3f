// The M3 chat protocol end to end through the output chain (OutputReplayer: tokenizer, streaming
// detokenizer, OutputParser, formats from the model directory): parse_cases.json holds assistant
// turns rendered by the real M3 template (random nested arguments, several calls, every thinking
// mode) and the model's quirks (scripts/golden/make_m3_chat_goldens.py); parsing must give back
// the reasoning, content and arguments they came from, identically whole and one token at a
// time. Also: format detection, the special tokens the parsers need surviving
// skip_special_tokens, and tool-call pieces streamed before the call's last token.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/template/chat_template.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/output_replay.h"
#include "gateway/tokenizer/tokenizer.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::text::ChatFormat;
using m3::text::OutputReplayer;
using m3::text::ReasoningSyntax;
using m3::text::ToolCallSyntax;
using Json = nlohmann::ordered_json;

namespace {

const OutputReplayer& Replayer(const std::string& model) {
  static const OutputReplayer m3 =
      OutputReplayer::FromModelDir(m3::test::DataPath("m3-chat/model"));
  static const OutputReplayer m2 =
      OutputReplayer::FromModelDir(m3::test::DataPath("chat-e2e/model"));
  return model == "chat-e2e" ? m2 : m3;
}

const std::string NS = "]<]minimax[>[";

}  // namespace

TEST_CASE("chat format from the template; flags override it") {
  const auto m3_source = m3::tmpl::LoadChatTemplateSource(m3::test::DataPath("m3-chat/model"));
  const auto m2_source = m3::tmpl::LoadChatTemplateSource(m3::test::DataPath("chat-e2e/model"));
  const auto llama =
      m3::test::ReadFile(m3::test::DataPath("chat_templates/Llama-3.2-3B-Instruct.jinja"));
  ChatFormat f = m3::text::DetectChatFormat(m3_source);
  CHECK(f.reasoning == ReasoningSyntax::kMiniMaxM3);
  CHECK(f.tool_calls == ToolCallSyntax::kMiniMaxM3);
  f = m3::text::DetectChatFormat(m2_source);
  CHECK(f.reasoning == ReasoningSyntax::kMiniMaxM2);
  CHECK(f.tool_calls == ToolCallSyntax::kMiniMaxM2);
  f = m3::text::DetectChatFormat(llama);  // what the gateway always parsed
  CHECK(f.reasoning == ReasoningSyntax::kMiniMaxM2);
  CHECK(f.tool_calls == ToolCallSyntax::kMiniMaxM2);

  f = m3::text::ResolveChatFormat(m2_source, "minimax-m3", "none");
  CHECK(f.reasoning == ReasoningSyntax::kMiniMaxM3);
  CHECK(!f.tool_calls);
  f = m3::text::ResolveChatFormat(m3_source, "none", "minimax_m2");
  CHECK(!f.reasoning);
  CHECK(f.tool_calls == ToolCallSyntax::kMiniMaxM2);
  f = m3::text::ResolveChatFormat(m3_source, "auto", "");
  CHECK(f.tool_calls == ToolCallSyntax::kMiniMaxM3);
  CHECK(m3::text::ReasoningSyntaxName(f.reasoning) == "minimax_m3");
  CHECK_THROWS_AS(m3::text::ResolveChatFormat(m3_source, "deepseek_r1", "auto"), m3::Error);
  CHECK_THROWS_WITH_AS(m3::text::ResolveChatFormat(m3_source, "auto", "hermes"),
                       doctest::Contains("--tool-call-parser"), m3::Error);
}

TEST_CASE("the M3 test model's tokenizer has the M3 markers as special tokens") {
  const auto& tok = Replayer("m3-chat").prompt_builder().tokenizer();
  for (const char* s : {"<mm:think>", "</mm:think>", "]<]minimax[>[", "]~b]", "[e~[", "]~!b["}) {
    CAPTURE(s);
    auto id = tok.TokenToId(s);
    REQUIRE(id);
    CHECK(tok.IsSpecial(*id));
    CHECK(tok.Encode(std::string("x") + s + "y").size() >= 3);
  }
  CHECK(tok.Encode(NS + "<tool_call>")[0] == *tok.TokenToId(NS));
}

TEST_CASE("parse_cases.json: parsing inverts the template, whole and one token at a time") {
  const Json cases =
      Json::parse(m3::test::ReadFile(m3::test::DataPath("m3-chat/parse_cases.json")));
  REQUIRE(cases.size() >= 50);
  size_t with_calls = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    CAPTURE(name);
    const auto& replayer = Replayer(c["model"]);
    const std::string text = c["text"];
    const auto whole = replayer.Replay(c["request"], text, 0);
    const auto& e = c["expected"];
    CHECK(whole.reasoning_content == e["reasoning_content"].get<std::string>());
    CHECK(whole.content == e["content"].get<std::string>());
    CHECK(m3::text::FinishReasonName(whole.finish_reason) == e["finish_reason"].get<std::string>());
    REQUIRE(whole.tool_calls.size() == e["tool_calls"].size());
    for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
      CAPTURE(whole.tool_calls[i].arguments);
      CHECK(whole.tool_calls[i].name == e["tool_calls"][i]["name"].get<std::string>());
      CHECK(Json::parse(whole.tool_calls[i].arguments) == e["tool_calls"][i]["arguments"]);
    }
    with_calls += !whole.tool_calls.empty();
    for (size_t chunk : {1, 3}) {
      CAPTURE(chunk);
      const auto streamed = replayer.Replay(c["request"], text, chunk);
      CHECK(streamed.reasoning_content == whole.reasoning_content);
      CHECK(streamed.content == whole.content);
      CHECK(streamed.finish_reason == whole.finish_reason);
      REQUIRE(streamed.tool_calls.size() == whole.tool_calls.size());
      for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
        CHECK(streamed.tool_calls[i].name == whole.tool_calls[i].name);
        CHECK(streamed.tool_calls[i].arguments == whole.tool_calls[i].arguments);
      }
      // No special-token text reaches the user where the tokens are skipped.
      if (c["request"].value("skip_special_tokens", true)) {
        for (const char* s : {"]<]minimax[>[", "<mm:think>", "</mm:think>", "[e~["}) {
          CHECK(streamed.content.find(s) == std::string::npos);
          CHECK(streamed.reasoning_content.find(s) == std::string::npos);
        }
      }
    }
  }
  CHECK(with_calls >= 30);
}

TEST_CASE(
    "streamed tool calls: id and name before the call's last token, arguments per "
    "parameter") {
  const auto& replayer = Replayer("m3-chat");
  const auto& tok = replayer.prompt_builder().tokenizer();
  const Json request = Json::parse(R"({"tools": [{"type": "function", "function": {
      "name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}}}}}],
      "chat_template_kwargs": {"thinking_mode": "enabled"}})");
  const std::string text = "Plan.</mm:think>" + NS + "<tool_call>\n" + NS +
                           "<invoke name=\"get_weather\">" + NS + "<city>Paris" + NS + "</city>" +
                           NS + "<days>3" + NS + "</days>" + NS + "</invoke>\n" + NS +
                           "</tool_call>[e~[";
  const std::string prompt = replayer.prompt_builder()
                                 .Build({Json::array({{{"role", "user"}, {"content", "Hi"}}}),
                                         request["tools"], true, request["chat_template_kwargs"]},
                                        {})
                                 .rendered;
  m3::text::OutputParserOptions o = replayer.ParserOptions(request, prompt);
  o.make_tool_call_id = [](size_t i) { return "call_" + std::to_string(i); };
  m3::text::OutputParser parser(tok, o);
  const auto ids = tok.Encode(text, false);
  const size_t invoke_close = tok.Encode(text.substr(0, text.find("</invoke>")), false).size();
  std::vector<std::pair<size_t, m3::text::ToolCall>> pieces;
  std::string reasoning, content;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto d = parser.Step(ids[i]);
    reasoning += d.reasoning_content;
    content += d.content;
    for (auto& p : d.tool_calls) pieces.emplace_back(i, p);
  }
  CHECK(reasoning == "Plan.");
  CHECK(content.empty());
  REQUIRE(pieces.size() == 4);  // header, city, days, close
  CHECK(pieces[0].second.id == "call_0");
  CHECK(pieces[0].second.name == "get_weather");
  CHECK(pieces[0].first < pieces[1].first);
  CHECK(pieces[1].first < pieces[2].first);
  CHECK(pieces[2].first < invoke_close);  // every parameter before the call's last token
  CHECK(pieces[1].second.arguments == R"({"city":"Paris")");
  CHECK(pieces[2].second.arguments == R"(,"days":3)");
  CHECK(pieces[3].second.arguments == "}");
  REQUIRE(parser.result().tool_calls.size() == 1);
  CHECK(parser.result().tool_calls[0].arguments == R"({"city":"Paris","days":3})");
  CHECK(parser.result().finish_reason == m3::text::FinishReason::kToolCalls);
}

TEST_CASE("<tool_call> as special tokens too: the parser still sees them") {
  // A tokenizer that also has M3's possible <tool_call> / </tool_call> special tokens.
  Json root = Json::parse(m3::test::ReadFile(m3::test::DataPath("m3-chat/model/tokenizer.json")));
  int32_t next = 0;
  for (const auto& [k, v] : root["model"]["vocab"].items())
    next = std::max(next, v.get<int32_t>() + 1);
  for (const char* s : {"<tool_call>", "</tool_call>"}) {
    root["added_tokens"].push_back({{"id", next++},
                                    {"content", s},
                                    {"single_word", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"special", true}});
  }
  const auto tok = m3::tok::Tokenizer::FromParsed(nlohmann::json::parse(root.dump()), "test");
  REQUIRE(tok.IsSpecial(*tok.TokenToId("<tool_call>")));
  m3::text::OutputParserOptions o;
  o.stop.stop_token_ids = {*tok.TokenToId("[e~[")};
  o.parse_tool_calls = true;
  ChatFormat f;
  f.reasoning = ReasoningSyntax::kMiniMaxM3;
  f.tool_calls = ToolCallSyntax::kMiniMaxM3;
  m3::text::ApplyChatFormat(f, "]~b]ai\n", o);
  const std::string text = "</mm:think>Hi " + NS + "<tool_call>\n" + NS + "<invoke name=\"f\">" +
                           NS + "<a>1" + NS + "</a>" + NS + "</invoke>\n" + NS + "</tool_call>[e~[";
  m3::text::OutputParser parser(tok, o);
  for (int32_t id : tok.Encode(text, false)) parser.Step(id);
  parser.Finish(m3::text::FinishReason::kStop);
  CHECK(parser.result().content == "Hi ");
  REQUIRE(parser.result().tool_calls.size() == 1);
  CHECK(parser.result().tool_calls[0].arguments == R"({"a":1})");
}

TEST_CASE("replay: bad requests are refused with a message") {
  const auto& r = Replayer("m3-chat");
  CHECK_THROWS_WITH_AS(r.Replay(Json::array(), "x", 0), doctest::Contains("JSON object"),
                       m3::Error);
  CHECK_THROWS_WITH_AS(r.Replay(Json::parse(R"({"tools": {}})"), "x", 0),
                       doctest::Contains("\"tools\""), m3::Error);
  CHECK_THROWS_WITH_AS(r.Replay(Json::parse(R"({"chat_template_kwargs": 3})"), "x", 0),
                       doctest::Contains("chat_template_kwargs"), m3::Error);
  CHECK_THROWS_WITH_AS(r.Replay(Json::parse(R"({"messages": []})"), "x", 0),
                       doctest::Contains("messages"), m3::Error);
  CHECK_THROWS_AS(OutputReplayer::FromModelDir(m3::test::DataPath("m3-chat/model"), "nope"),
                  m3::Error);
}
