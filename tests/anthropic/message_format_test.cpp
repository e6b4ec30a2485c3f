// Anthropic message bodies and event sequences: token ids of the MiniMax test tokenizers in
// (M2 and M3 formats), the exact message JSON and SSE events out; the event logic also from
// scripted parser deltas; failures in Anthropic's error shape.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "gateway/anthropic/message_body.h"
#include "gateway/anthropic/message_formatter.h"
#include "gateway/anthropic/message_stream.h"
#include "gateway/anthropic/messages_request.h"
#include "gateway/openai/output_options.h"
#include "gateway/text/chat_format.h"
#include "tests/test_util.h"

using namespace m3::anthropic;
using m3::text::FinishReason;
using m3::text::OutputDelta;
using m3::text::ToolCall;
using m3::tok::Tokenizer;

namespace {

const Tokenizer& Tok() {
  static const Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  return tok;
}

const Tokenizer& M3Tok() {
  static const Tokenizer tok =
      Tokenizer::FromFile(m3::test::DataPath("m3-chat/model/tokenizer.json"));
  return tok;
}

std::vector<int32_t> Ids(const std::string& text) {
  return Tok().Encode(text);
}

int32_t Eos() {
  return *Tok().TokenToId("[e~[");
}

m3::openai::ResponseIdentity Identity() {
  return {"msg_test", 1700000000, "m3"};
}

const char* kTools = R"("tools":[{"name":"get_weather","input_schema":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}])";

// The parser options the handler builds for a Messages body (M2 format, reasoning open).
m3::text::OutputParserOptions Options(const std::string& extra = "") {
  std::string body = R"({"model":"m3","max_tokens":100,"messages":[{"role":"user","content":"x"}])";
  if (!extra.empty()) body += "," + extra;
  body += "}";
  m3::openai::ServedModel model;
  model.name = "m3";
  const MessagesRequest req =
      ParseMessagesRequest(Json::parse(body), model, {}, MessagesEndpoint::kCreate);
  const std::vector<int64_t> eos = {Eos()};
  auto o = m3::openai::ChatOutputOptions(req.chat, eos, "]~b]ai\n<think>\n", {});
  o.make_tool_call_id = [](size_t i) { return "toolu_" + std::to_string(i); };
  return o;
}

std::string Join(const std::vector<std::string>& events) {
  std::string s;
  for (const auto& e : events) s += e;
  return s;
}

std::string Event(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}

// The events as (name, data) pairs; each must be well framed, its data JSON whose "type" is
// the event's name.
std::vector<std::pair<std::string, OJson>> Parse(const std::vector<std::string>& events) {
  std::vector<std::pair<std::string, OJson>> out;
  for (const std::string& e : events) {
    REQUIRE(e.rfind("event: ", 0) == 0);
    const size_t nl = e.find('\n');
    REQUIRE(e.compare(nl, 7, "\ndata: ") == 0);
    REQUIRE(e.substr(e.size() - 2) == "\n\n");
    const std::string name = e.substr(7, nl - 7);
    OJson data = OJson::parse(e.substr(nl + 7));
    CHECK(data["type"] == name);
    out.emplace_back(name, std::move(data));
  }
  return out;
}

// What an Anthropic client rebuilds from the events (content blocks with their deltas applied;
// tool inputs from the concatenated partial JSON), checking the block protocol on the way:
// blocks start in index order, deltas go to the open block and match its type, every block
// stops before the next starts and before message_delta.
OJson Accumulate(const std::vector<std::pair<std::string, OJson>>& events) {
  OJson message;
  int open = -1;
  std::map<int, std::string> json;
  for (const auto& [name, e] : events) {
    if (name == "message_start") {
      message = e["message"];
    } else if (name == "content_block_start") {
      CHECK(open == -1);
      open = e["index"];
      CHECK(open == static_cast<int>(message["content"].size()));
      message["content"].push_back(e["content_block"]);
    } else if (name == "content_block_delta") {
      REQUIRE(e["index"] == open);
      OJson& block = message["content"][open];
      const OJson& d = e["delta"];
      if (d["type"] == "text_delta") {
        CHECK(block["type"] == "text");
        block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (d["type"] == "thinking_delta") {
        CHECK(block["type"] == "thinking");
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      } else {
        REQUIRE(d["type"] == "input_json_delta");
        CHECK(block["type"] == "tool_use");
        json[open] += d["partial_json"].get<std::string>();
      }
    } else if (name == "content_block_stop") {
      CHECK(e["index"] == open);
      if (json.count(open)) message["content"][open]["input"] = OJson::parse(json[open]);
      open = -1;
    } else if (name == "message_delta") {
      CHECK(open == -1);
      message["stop_reason"] = e["delta"]["stop_reason"];
      message["stop_sequence"] = e["delta"]["stop_sequence"];
      message["usage"] = e["usage"];
    }
  }
  return message;
}

}  // namespace

TEST_CASE("whole message: thinking, text and tool_use blocks, exact JSON") {
  MessageBody b(Tok(), Identity(), Options(kTools));
  auto ids =
      Ids("Need weather.</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
          "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n"
          "</invoke>\n</minimax:tool_call>");
  ids.push_back(Eos());
  b.Push(ids);
  CHECK(b.output_finished());
  CHECK(
      b.Finish(FinishReason::kStop, {20, 30, 0}).dump() ==
      R"({"id":"msg_test","type":"message","role":"assistant","model":"m3","content":[{"type":"thinking","thinking":"Need weather.","signature":""},{"type":"text","text":"Checking.\n"},{"type":"tool_use","id":"toolu_0","name":"get_weather","input":{"city":"Paris","days":3}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":30}})");
}

TEST_CASE("whole message: stop reasons, stop_sequence, cached usage, blank text") {
  {
    MessageBody b(Tok(), Identity(), Options());
    auto ids = Ids("</think>\n\nHello!");
    ids.push_back(Eos());
    b.Push(ids);
    const OJson m = b.Finish(FinishReason::kStop, {10, 5, 4});
    CHECK(m["content"].dump() == R"([{"type":"text","text":"Hello!"}])");
    CHECK(m["stop_reason"] == "end_turn");
    CHECK(m["stop_sequence"].is_null());
    CHECK(m["usage"].dump() ==
          R"({"input_tokens":6,"output_tokens":5,"cache_read_input_tokens":4})");
  }
  {
    MessageBody b(Tok(), Identity(), Options(R"("stop_sequences":["STOP"])"));
    b.Push(Ids("</think>one STOP two"));
    CHECK(b.output_finished());
    const OJson m = b.Finish(FinishReason::kAbort, {3, 4, 0});
    CHECK(m["content"].dump() == R"([{"type":"text","text":"one "}])");
    CHECK(m["stop_reason"] == "stop_sequence");
    CHECK(m["stop_sequence"] == "STOP");
  }
  {
    MessageBody b(Tok(), Identity(), Options());
    b.Push(Ids("Still thinking"));
    const OJson m = b.Finish(FinishReason::kLength, {3, 4, 0});
    CHECK(m["content"].dump() ==
          R"([{"type":"thinking","thinking":"Still thinking","signature":""}])");
    CHECK(m["stop_reason"] == "max_tokens");
  }
  {
    // Whitespace alone after the reasoning is layout, not a text block.
    MessageBody b(Tok(), Identity(), Options());
    b.Push(Ids("Hm.</think>\n\n  \n"));
    const OJson m = b.Finish(FinishReason::kStop, {3, 4, 0});
    CHECK(m["content"].dump() == R"([{"type":"thinking","thinking":"Hm.","signature":""}])");
    CHECK(m["stop_reason"] == "end_turn");
  }
}

TEST_CASE("streamed message: exact event sequence") {
  MessageStream s(Tok(), Identity(), Options(), /*input_tokens=*/12);
  std::vector<std::string> events = s.Start();
  auto ids = Ids("Greeting.</think>\n\nHello!");
  ids.push_back(Eos());
  for (auto& e : s.Push(ids)) events.push_back(e);
  CHECK(s.output_finished());
  for (auto& e : s.Push(Ids("ignored"))) events.push_back(e);
  for (auto& e : s.Finish(FinishReason::kStop, {12, 7, 0})) events.push_back(e);
  const std::string expected =
      Event(
          "message_start",
          R"({"type":"message_start","message":{"id":"msg_test","type":"message","role":"assistant","model":"m3","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":0}}})") +
      Event("ping", R"({"type":"ping"})") +
      Event(
          "content_block_start",
          R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})") +
      Event(
          "content_block_delta",
          R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Greeting."}})") +
      Event("content_block_stop", R"({"type":"content_block_stop","index":0})") +
      Event(
          "content_block_start",
          R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})") +
      Event(
          "content_block_delta",
          R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello!"}})") +
      Event("content_block_stop", R"({"type":"content_block_stop","index":1})") +
      Event(
          "message_delta",
          R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"output_tokens":7}})") +
      Event("message_stop", R"({"type":"message_stop"})");
  CHECK(Join(events) == expected);
}

TEST_CASE("streamed token by token: blocks equal the whole message (M2 tool calls)") {
  const std::string text =
      "Need weather.</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n"
      "</invoke>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Nice</parameter>\n"
      "</invoke>\n</minimax:tool_call>";
  auto ids = Ids(text);
  ids.push_back(Eos());
  MessageStream s(Tok(), Identity(), Options(kTools), 5);
  std::vector<std::string> events = s.Start();
  for (int32_t id : ids) {
    const int32_t one[1] = {id};
    for (auto& e : s.Push(one)) events.push_back(e);
  }
  for (auto& e : s.Finish(FinishReason::kLength, {5, 40, 0})) events.push_back(e);
  const auto parsed = Parse(events);
  CHECK(parsed.front().first == "message_start");
  CHECK(parsed[1].first == "ping");
  CHECK(parsed.back().first == "message_stop");
  OJson streamed = Accumulate(parsed);

  MessageBody b(Tok(), Identity(), Options(kTools));
  b.Push(ids);
  const OJson whole = b.Finish(FinishReason::kLength, {5, 40, 0});
  CHECK(streamed.dump() == whole.dump());
  REQUIRE(whole["content"].size() == 4);
  CHECK(whole["content"][3]["input"].dump() == R"({"city":"Nice"})");
  CHECK(whole["stop_reason"] == "tool_use");
}

TEST_CASE("streamed M3 tool call: the block opens and its input streams before the call ends") {
  const std::string NS = "]<]minimax[>[";
  const std::string text = "Plan.</mm:think>Sure." + NS + "<tool_call>\n" + NS +
                           "<invoke name=\"get_weather\">" + NS + "<city>Paris" + NS + "</city>" +
                           NS + "<days>3" + NS + "</days>" + NS + "</invoke>\n" + NS +
                           "</tool_call>[e~[";
  m3::text::OutputParserOptions o = Options(kTools);
  o.stop.stop_token_ids = {*M3Tok().TokenToId("[e~[")};
  m3::text::ChatFormat f;
  f.reasoning = m3::text::ReasoningSyntax::kMiniMaxM3;
  f.tool_calls = m3::text::ToolCallSyntax::kMiniMaxM3;
  m3::text::ApplyChatFormat(f, "]~b]ai\n<mm:think>", o);
  MessageStream s(M3Tok(), Identity(), o, 5);
  std::vector<std::string> events = s.Start();
  const auto ids = M3Tok().Encode(text, false);
  const size_t last_of_call = M3Tok().Encode(text.substr(0, text.find("</invoke>")), false).size();
  size_t tool_start_at = 0, first_json_at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t one[1] = {ids[i]};
    for (auto& e : s.Push(one)) {
      if (!tool_start_at && e.find(R"("type":"tool_use")") != std::string::npos)
        tool_start_at = i + 1;
      if (!first_json_at && e.find("input_json_delta") != std::string::npos) first_json_at = i + 1;
      events.push_back(e);
    }
  }
  for (auto& e : s.Finish(FinishReason::kStop, {5, 30, 0})) events.push_back(e);
  CHECK(tool_start_at > 0);
  CHECK(tool_start_at < last_of_call);
  CHECK(first_json_at > 0);
  CHECK(first_json_at < last_of_call);
  const OJson m = Accumulate(Parse(events));
  CHECK(
      m["content"].dump() ==
      R"([{"type":"thinking","thinking":"Plan.","signature":""},{"type":"text","text":"Sure."},{"type":"tool_use","id":"toolu_0","name":"get_weather","input":{"city":"Paris","days":3}}])");
  CHECK(m["stop_reason"] == "tool_use");
  // No special-token text reaches any block.
  for (const std::string& e : events) {
    CHECK(e.find(NS) == std::string::npos);
    CHECK(e.find("mm:think") == std::string::npos);
  }
}

TEST_CASE("events from scripted parser deltas") {
  MessageStream s(Tok(), Identity(), Options(kTools), 1);
  std::vector<std::string> out;
  auto delta = [](std::string reasoning, std::string content, std::vector<ToolCall> calls = {}) {
    OutputDelta d;
    d.reasoning_content = std::move(reasoning);
    d.content = std::move(content);
    d.tool_calls = std::move(calls);
    return d;
  };
  s.Emit(delta("a", ""), out);
  s.Emit(delta("b", "\n\n"), out);  // blank text opens no block (yet)
  s.Emit(delta("", " "), out);
  s.Emit(delta("", "x"), out);  // the withheld whitespace leads the text block
  s.Emit(delta("", "y", {{0, "toolu_a", "f", ""}}), out);
  s.Emit(delta("", "", {{0, "", "", "{\"k\":"}, {0, "", "", "1}"}}), out);
  s.Emit(delta("", "", {{1, "toolu_b", "g", "{}"}}), out);
  s.Emit(delta("", "", {{0, "", "", "lost?"}}), out);  // a fragment of a closed call: ignored
  s.Emit(delta("", "\n"), out);                        // blank again: no block
  s.Emit(delta("c", ""), out);
  s.Emit(OutputDelta{}, out);
  std::vector<std::string> got;
  for (const auto& [name, e] : Parse(out)) {
    std::string line = name + " " + std::to_string(e.value("index", -1));
    if (e.contains("content_block")) line += " " + e["content_block"].dump();
    if (e.contains("delta")) line += " " + e["delta"].dump();
    got.push_back(line);
  }
  const std::vector<std::string> expected = {
      R"(content_block_start 0 {"type":"thinking","thinking":"","signature":""})",
      R"(content_block_delta 0 {"type":"thinking_delta","thinking":"a"})",
      R"(content_block_delta 0 {"type":"thinking_delta","thinking":"b"})",
      R"(content_block_stop 0)",
      R"(content_block_start 1 {"type":"text","text":""})",
      R"(content_block_delta 1 {"type":"text_delta","text":"\n\n x"})",
      R"(content_block_delta 1 {"type":"text_delta","text":"y"})",
      R"(content_block_stop 1)",
      R"(content_block_start 2 {"type":"tool_use","id":"toolu_a","name":"f","input":{}})",
      R"(content_block_delta 2 {"type":"input_json_delta","partial_json":"{\"k\":"})",
      R"(content_block_delta 2 {"type":"input_json_delta","partial_json":"1}"})",
      R"(content_block_stop 2)",
      R"(content_block_start 3 {"type":"tool_use","id":"toolu_b","name":"g","input":{}})",
      R"(content_block_delta 3 {"type":"input_json_delta","partial_json":"{}"})",
      R"(content_block_stop 3)",
      R"(content_block_start 4 {"type":"thinking","thinking":"","signature":""})",
      R"(content_block_delta 4 {"type":"thinking_delta","thinking":"c"})",
  };
  CHECK(got == expected);
}

TEST_CASE("failures in Anthropic's shape, whole and mid-stream") {
  for (bool stream : {false, true}) {
    auto f = MakeMessageFormatter(Tok(), Identity(), Options(), stream, 3);
    CHECK(f->streaming() == stream);
    CHECK(
        f->ErrorBody(503, "no engine is available", "no_engine_available") ==
        R"({"type":"error","error":{"type":"overloaded_error","message":"no engine is available"}})");
    CHECK(Join(f->StreamErrorEvents(502, "the engine failed", "engine_error")) ==
          Event("error",
                R"({"type":"error","error":{"type":"api_error","message":"the engine failed"}})"));
  }
  // The OpenAI formatters keep OpenAI's shape (the interface's default).
  auto chat = m3::openai::MakeChatFormatter(Tok(), Identity(), Options(), true, false, false);
  CHECK(OJson::parse(chat->ErrorBody(429, "busy", "engine_busy"))["error"]["code"] ==
        "engine_busy");
  const std::string events = Join(chat->StreamErrorEvents(429, "busy", "engine_busy"));
  CHECK(events.rfind("data: {\"error\":", 0) == 0);
  CHECK(events.substr(events.size() - 14) == "data: [DONE]\n\n");
}

TEST_CASE("the whole formatter's body is the message; the streamed one's events add up") {
  auto whole = MakeMessageFormatter(Tok(), Identity(), Options(), false, 3);
  CHECK(whole->Start().empty());
  auto ids = Ids("</think>Hi");
  ids.push_back(Eos());
  CHECK(whole->Push(ids, {}).empty());
  const auto body = whole->Finish(FinishReason::kStop, {3, 2, 0});
  REQUIRE(body.size() == 1);
  CHECK(OJson::parse(body[0])["content"].dump() == R"([{"type":"text","text":"Hi"}])");

  auto streamed = MakeMessageFormatter(Tok(), Identity(), Options(), true, 3);
  std::vector<std::string> events = streamed->Start();
  for (auto& e : streamed->Push(ids, {})) events.push_back(e);
  CHECK(streamed->output_finished());
  for (auto& e : streamed->Finish(FinishReason::kStop, {3, 2, 0})) events.push_back(e);
  const OJson m = Accumulate(Parse(events));
  CHECK(m["content"].dump() == R"([{"type":"text","text":"Hi"}])");
  CHECK(m["usage"]["output_tokens"] == 2);
}
