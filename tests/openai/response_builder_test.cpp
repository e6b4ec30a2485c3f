// Response builders: token ids of the MiniMax test tokenizer in, the exact chat.completion JSON
// and SSE event sequence out (role, reasoning_content, content, tool_calls, finish_reason,
// usage, [DONE]).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gateway/openai/chat_completion.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/chat_stream.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/response_json.h"
#include "gateway/openai/text_completion.h"
#include "tests/test_util.h"

using namespace m3::openai;
using m3::text::FinishReason;
using m3::tok::Tokenizer;

namespace {

const Tokenizer& Tok() {
  static const Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  return tok;
}

std::vector<int32_t> Ids(const std::string& text) {
  return Tok().Encode(text);
}

int32_t Eos() {
  return *Tok().TokenToId("[e~[");
}

ResponseIdentity Identity() {
  return {"chatcmpl-test", 1700000000, "m3"};
}

m3::text::OutputParserOptions Options(const std::string& body_tools = "") {
  std::string body = R"({"messages":[{"role":"user","content":"x"}])";
  if (!body_tools.empty()) body += R"(,"tools":)" + body_tools;
  body += "}";
  ServedModel model;
  model.name = "m3";
  const ChatRequest req = ParseChatRequest(Json::parse(body), model, {});
  const std::vector<int64_t> eos = {Eos()};
  auto o = ChatOutputOptions(req, eos, "]~b]ai\n<think>\n", m3::text::ChatFormat{});
  o.make_tool_call_id = [](size_t i) { return "call_" + std::to_string(i); };
  return o;
}

std::string Join(const std::vector<std::string>& events) {
  std::string s;
  for (const auto& e : events) s += e;
  return s;
}

const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";

}  // namespace

TEST_CASE("PromptOpensReasoning") {
  CHECK(PromptOpensReasoning("]~b]ai\n<think>\n"));
  CHECK(PromptOpensReasoning("<think>"));
  CHECK_FALSE(PromptOpensReasoning("<think>\nx</think>\n"));
  CHECK_FALSE(PromptOpensReasoning(""));
}

TEST_CASE("streamed chat: exact SSE sequence with usage") {
  ChatStream s(Tok(), Identity(), Options(), /*include_usage=*/true, /*logprobs=*/false);
  std::vector<std::string> events = s.Start();
  auto ids = Ids("Greeting.</think>\n\nHello!");
  ids.push_back(Eos());
  for (auto& e : s.Push(ids)) events.push_back(e);
  CHECK(s.output_finished());
  for (auto& e : s.Push(Ids("ignored"))) events.push_back(e);
  for (auto& e : s.Finish(FinishReason::kStop, {12, 7, 0})) events.push_back(e);
  const std::string head =
      R"({"id":"chatcmpl-test","object":"chat.completion.chunk","created":1700000000,"model":"m3","choices":[{"index":0,"delta":)";
  const std::string expected =
      "data: " + head +
      R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})" +
      "\n\n" + "data: " + head +
      R"({"reasoning_content":"Greeting."},"logprobs":null,"finish_reason":null}],"usage":null})" +
      "\n\n" + "data: " + head +
      R"({"content":"Hello!"},"logprobs":null,"finish_reason":null}],"usage":null})" + "\n\n" +
      "data: " + head + R"({},"logprobs":null,"finish_reason":"stop"}],"usage":null})" + "\n\n" +
      R"(data: {"id":"chatcmpl-test","object":"chat.completion.chunk","created":1700000000,"model":"m3","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}})" +
      "\n\n" + "data: [DONE]\n\n";
  CHECK(Join(events) == expected);
}

TEST_CASE("streamed chat token by token: deltas add up, tool calls become deltas") {
  ChatStream s(Tok(), Identity(), Options(kTools), /*include_usage=*/false, false);
  std::vector<std::string> events = s.Start();
  auto ids =
      Ids("Need weather.</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
          "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n"
          "</invoke>\n</minimax:tool_call>");
  ids.push_back(Eos());
  for (int32_t id : ids) {
    const int32_t one[1] = {id};
    for (auto& e : s.Push(one)) events.push_back(e);
  }
  for (auto& e : s.Finish(FinishReason::kLength, {5, 40, 0})) events.push_back(e);

  std::string reasoning, content;
  Json calls = Json::array();
  std::vector<std::string> finishes;
  REQUIRE(events.back() == "data: [DONE]\n\n");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const std::string& e = events[i];
    REQUIRE(e.rfind("data: ", 0) == 0);
    REQUIRE(e.size() > 8);
    REQUIRE(e.substr(e.size() - 2) == "\n\n");
    const Json chunk = Json::parse(e.substr(6));
    CHECK_FALSE(chunk.contains("usage"));
    const Json& choice = chunk["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    if (delta.contains("content")) content += delta["content"];
    if (delta.contains("tool_calls")) {
      for (const auto& c : delta["tool_calls"]) calls.push_back(c);
    }
    if (!choice["finish_reason"].is_null()) finishes.push_back(choice["finish_reason"]);
  }
  CHECK(reasoning == "Need weather.");
  CHECK(content == "Checking.\n");
  REQUIRE(calls.size() == 1);
  CHECK(
      calls[0].dump() ==
      R"({"index":0,"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":3}"}})");
  CHECK(finishes == std::vector<std::string>{"tool_calls"});
}

TEST_CASE("non-streaming chat.completion: exact JSON") {
  ChatCompletion c(Tok(), Identity(), Options(kTools), false);
  auto ids =
      Ids("Need weather.</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
          "<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>");
  ids.push_back(Eos());
  c.Push(ids);
  const Json body = c.Finish(FinishReason::kStop, {20, 30, 16});
  CHECK(
      body.dump() ==
      R"({"id":"chatcmpl-test","object":"chat.completion","created":1700000000,"model":"m3","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"Need weather.","tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":30,"total_tokens":50,"prompt_tokens_details":{"cached_tokens":16}}})");
}

TEST_CASE("length finish, stop strings and logprobs") {
  ChatCompletion c(Tok(), Identity(), Options(), /*logprobs=*/true);
  const auto ids = Ids("</think>ab");
  std::vector<TokenLogprob> lps;
  for (size_t i = 0; i < ids.size(); ++i) {
    lps.push_back({ids[i], -0.5f * static_cast<float>(i + 1), {{ids[i], -0.25f}}});
  }
  c.Push(ids, lps);
  const Json body = c.Finish(FinishReason::kLength, {3, static_cast<int64_t>(ids.size()), 0});
  const Json& choice = body["choices"][0];
  CHECK(choice["finish_reason"] == "length");
  CHECK(choice["message"]["content"] == "ab");
  CHECK(choice["message"]["reasoning_content"].is_null());
  REQUIRE(choice["logprobs"]["content"].size() == ids.size());
  std::string joined;
  for (const auto& e : choice["logprobs"]["content"]) {
    joined += e["token"].get<std::string>();
    CHECK(e["top_logprobs"].size() == 1);
    CHECK(e["top_logprobs"][0]["token"] == e["token"]);
    CHECK(e["bytes"].size() == e["token"].get<std::string>().size());
  }
  CHECK(joined == "</think>ab");
  CHECK(choice["logprobs"]["content"][0]["logprob"] == -0.5);

  // A stop string ends the output mid-stream; later ids are not output.
  m3::text::OutputParserOptions o = Options();
  o.stop.stop_strings = {"STOP"};
  ChatStream s(Tok(), Identity(), o, false, false);
  auto events = s.Start();
  for (auto& e : s.Push(Ids("</think>one STOP two"))) events.push_back(e);
  CHECK(s.output_finished());
  for (auto& e : s.Finish(FinishReason::kAbort, {})) events.push_back(e);
  const std::string all = Join(events);
  CHECK(all.find(R"("content":"one ")") != std::string::npos);
  CHECK(all.find("two") == std::string::npos);
  CHECK(all.find(R"("finish_reason":"stop")") != std::string::npos);
}

TEST_CASE("text completion: streamed and whole") {
  ServedModel model;
  model.name = "m3";
  const CompletionRequest req =
      ParseCompletionRequest(Json::parse(R"({"prompt":"x","stop":"END"})"), model, {}, 0);
  const std::vector<int64_t> eos = {Eos()};
  const ResponseIdentity id{"cmpl-test", 1700000000, "m3"};

  TextCompletion stream(Tok(), id, CompletionOutputOptions(req, eos), /*include_usage=*/true,
                        false);
  std::vector<std::string> events = stream.PushEvents(Ids("<think>raw text END more"));
  for (auto& e : stream.FinishEvents(FinishReason::kLength, {4, 6, 0})) events.push_back(e);
  const std::string head =
      R"({"id":"cmpl-test","object":"text_completion","created":1700000000,"model":"m3","choices":)";
  CHECK(
      Join(events) ==
      "data: " + head +
          R"([{"index":0,"text":"raw text ","logprobs":null,"finish_reason":null}],"usage":null})" +
          "\n\n" + "data: " + head +
          R"([{"index":0,"text":"","logprobs":null,"finish_reason":"stop"}],"usage":null})" +
          "\n\n" + "data: " + head +
          R"([],"usage":{"prompt_tokens":4,"completion_tokens":6,"total_tokens":10}})" + "\n\n" +
          "data: [DONE]\n\n");

  TextCompletion whole(Tok(), id, CompletionOutputOptions(req, eos), false, /*logprobs=*/true);
  const auto ids = Ids("ab");
  std::vector<TokenLogprob> lps;
  for (int32_t t : ids) lps.push_back({t, -1.0f, {}});
  whole.Push(ids, lps);
  const Json body = whole.FinishBody(FinishReason::kLength, {4, 2, 0});
  CHECK(body["choices"][0]["text"] == "ab");
  CHECK(body["choices"][0]["finish_reason"] == "length");
  const Json& lp = body["choices"][0]["logprobs"];
  CHECK(lp["tokens"].size() == ids.size());
  CHECK(lp["text_offset"][0] == 0);
  CHECK(body["usage"]["total_tokens"] == 6);
}

TEST_CASE("tool-call JSON: whole, a stream's first piece, a continuation piece") {
  m3::text::ToolCall whole{1, "call_1", "get_weather", R"({"city":"Paris"})"};
  CHECK(
      ToolCallJson(whole, false).dump() ==
      R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}})");
  m3::text::ToolCall first{1, "call_1", "get_weather", ""};
  CHECK(
      ToolCallJson(first, true).dump() ==
      R"({"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}})");
  m3::text::ToolCall more{1, "", "", R"({"city":"Paris")"};
  CHECK(ToolCallJson(more, true).dump() ==
        R"({"index":1,"function":{"arguments":"{\"city\":\"Paris\""}})");
}
