// The MiniMax-M3 chat protocol through the API's own output path, deterministically: a chat
// request for the m3-chat test model (the real M3 template; `<mm:think>`, `</mm:think>` and the
// tool namespace token are special tokens of its tokenizer) is parsed and rendered as the
// server does, and scripted output token ids (what the model would emit) are fed to the
// GenerationResponder, the observer a GenerationSession reports engine responses to, through
// the chat formatter with the output options `serve` builds from the detected format. The
// SSE stream must carry the reasoning, the content and each tool call as it comes: id and name
// before the call's last token, argument fragments as parameters complete that concatenate to
// the final JSON, no special-token text in any field; the whole response has the whole calls
// and finish_reason "tool_calls".
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/api/generation_responder.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/response_formatter.h"
#include "gateway/template/chat_template.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/prompt_builder.h"
#include "tests/test_util.h"

using namespace m3;
using openai::Json;

namespace {

const std::string kModel = test::DataPath("m3-chat/model");
const std::string kNs = "]<]minimax[>[";

const text::PromptBuilder& Builder() {
  static const text::PromptBuilder b = text::PromptBuilder::FromModelDir(kModel);
  return b;
}

const tok::Tokenizer& Tok() {
  return Builder().tokenizer();
}

int32_t Eos() {
  return *Tok().TokenToId("[e~[");
}

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}},
  {"type":"function","function":{"name":"save_file","parameters":{"type":"object",
    "properties":{"filename":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}}}])";

// One SSE event as the client saw it, with how many output tokens had been fed by then.
struct Event {
  size_t tokens_fed = 0;
  Json chunk;  // null for [DONE]
};

struct Run {
  std::vector<Event> events;  // streaming
  int status = 0;
  std::string body;  // whole response (or error)
};

// Renders `body` as the server does and feeds `output` (scripted model output, special tokens
// recognized) and the end-of-sequence token to the responder, `per_response` ids at a time.
Run Generate(const std::string& body, const std::string& output, size_t per_response = 1) {
  openai::ServedModel model;
  model.name = "m3-chat";
  const openai::ChatRequest req =
      openai::ParseChatRequest(openai::ParseRequestBody(body, {}), model, {});
  const text::AssembledPrompt prompt = Builder().Build(req.ToPromptInput(), {});
  const text::ChatFormat format = text::DetectChatFormat(tmpl::LoadChatTemplateSource(kModel));
  const std::vector<int64_t> eos = {Eos()};
  auto formatter =
      openai::MakeChatFormatter(Tok(), {"chatcmpl-m3", 1700000000, model.name},
                                openai::ChatOutputOptions(req, eos, prompt.rendered, format),
                                req.stream.stream, req.stream.include_usage, false);

  Run run;
  size_t fed = 0;
  auto observer = api::MakeGenerationResponder(
      std::move(formatter),
      {[&](std::string events) {
         size_t at = 0;
         while (at < events.size()) {
           const size_t end = events.find("\n\n", at);
           REQUIRE(end != std::string::npos);
           const std::string e = events.substr(at, end - at);
           at = end + 2;
           REQUIRE(e.rfind("data: ", 0) == 0);
           const std::string data = e.substr(6);
           run.events.push_back({fed, data == "[DONE]" ? Json(nullptr) : Json::parse(data)});
         }
       },
       [&](int status, std::string b) {
         run.status = status;
         run.body = std::move(b);
       }});

  std::vector<int32_t> ids = Tok().Encode(output);
  ids.push_back(Eos());
  bool ended = false;
  for (size_t i = 0; i < ids.size() && !ended; i += per_response) {
    const size_t n = std::min(per_response, ids.size() - i);
    fed = i + n;
    ended = observer->OnTokens(std::span<const int32_t>(ids).subspan(i, n), {});
  }
  CHECK(ended);  // the end-of-sequence token ends the output on its own
  observer->OnFinish(text::FinishReason::kStop,
                     {static_cast<int64_t>(prompt.ids.size()), static_cast<int64_t>(fed), 0});
  return run;
}

// The number of tokens of `output` up to and including the one that completes the first
// occurrence of `marker` (decoded with special tokens, as the model wrote it).
size_t TokensThrough(const std::string& output, const std::string& marker) {
  const std::vector<int32_t> ids = Tok().Encode(output);
  for (size_t n = 1; n <= ids.size(); ++n) {
    const std::string text = Tok().Decode(std::span<const int32_t>(ids).first(n), false);
    if (text.find(marker) != std::string::npos) return n;
  }
  FAIL("marker not in output: ", marker);
  return 0;
}

bool HasSpecialText(const std::string& s) {
  for (const char* t : {"<mm:think>", "</mm:think>", "]<]minimax[>[", "<tool_call>", "</tool_call>",
                        "<invoke", "[e~[", "]~b]"}) {
    if (s.find(t) != std::string::npos) return true;
  }
  return false;
}

struct Streamed {
  std::string reasoning, content;
  std::vector<std::string> finishes;
  std::vector<Json> call_deltas;  // each tool_calls entry, in order
  std::vector<size_t> call_delta_tokens;
  bool usage = false, done = false;
};

Streamed Read(const Run& run) {
  Streamed s;
  REQUIRE(run.status == 200);
  REQUIRE(!run.events.empty());
  CHECK(run.events.back().chunk.is_null());
  for (const Event& e : run.events) {
    if (e.chunk.is_null()) {
      s.done = true;
      continue;
    }
    CHECK_FALSE(s.done);
    CHECK(e.chunk["object"] == "chat.completion.chunk");
    if (e.chunk.contains("usage") && !e.chunk["usage"].is_null()) s.usage = true;
    for (const Json& choice : e.chunk["choices"]) {
      const Json& d = choice["delta"];
      if (d.contains("reasoning_content")) {
        const std::string r = d["reasoning_content"];
        CHECK_MESSAGE(!HasSpecialText(r), r);
        s.reasoning += r;
      }
      if (d.contains("content") && d["content"].is_string()) {
        const std::string c = d["content"];
        CHECK_MESSAGE(!HasSpecialText(c), c);
        s.content += c;
      }
      if (d.contains("tool_calls")) {
        for (const Json& c : d["tool_calls"]) {
          CHECK_MESSAGE(!HasSpecialText(c.dump()), c.dump());
          s.call_deltas.push_back(c);
          s.call_delta_tokens.push_back(e.tokens_fed);
        }
      }
      if (!choice["finish_reason"].is_null()) s.finishes.push_back(choice["finish_reason"]);
    }
  }
  return s;
}

std::string Request(const std::string& mode, bool stream, bool tools = true) {
  std::string b = R"({"model":"m3-chat","messages":[{"role":"user","content":"Weather?"}])";
  if (tools) b += std::string(R"(,"tools":)") + kTools;
  if (!mode.empty()) b += R"(,"chat_template_kwargs":{"thinking_mode":")" + mode + "\"}";
  if (stream) b += R"(,"stream":true,"stream_options":{"include_usage":true})";
  return b + "}";
}

// What the model writes after the prompt opened reasoning (thinking enabled).
const std::string kToolOutput =
    "The user wants the weather; call the tool.</mm:think>Let me check." + kNs + "<tool_call>\n" +
    kNs + "<invoke name=\"get_weather\">" + kNs + "<city>Paris Nord" + kNs + "</city>" + kNs +
    "<days>3" + kNs + "</days>" + kNs + "</invoke>\n" + kNs + "<invoke name=\"save_file\">" + kNs +
    "<filename>007" + kNs + "</filename>" + kNs + "<tags>" + kNs + "<item>a" + kNs + "</item>" +
    kNs + "<item>b" + kNs + "</item>" + kNs + "</tags>" + kNs + "</invoke>\n" + kNs +
    "</tool_call>";

}  // namespace

TEST_CASE("the test tokenizer has the M3 markers as single special tokens") {
  for (const std::string& t : {std::string("<mm:think>"), std::string("</mm:think>"), kNs}) {
    CAPTURE(t);
    const std::vector<int32_t> ids = Tok().Encode("a" + t + "b");
    REQUIRE(Tok().TokenToId(t));
    CHECK(std::find(ids.begin(), ids.end(), *Tok().TokenToId(t)) != ids.end());
    CHECK(Tok().Decode(ids, /*skip_special_tokens=*/true).find(t) == std::string::npos);
  }
}

TEST_CASE("thinking enabled, streamed: reasoning, content and tool calls as they come") {
  for (size_t per_response : {size_t{1}, size_t{3}}) {
    CAPTURE(per_response);
    const Streamed s = Read(Generate(Request("enabled", true), kToolOutput, per_response));
    CHECK(s.reasoning == "The user wants the weather; call the tool.");
    CHECK(s.content == "Let me check.");
    CHECK(s.finishes == std::vector<std::string>{"tool_calls"});
    CHECK(s.usage);

    // Per call: the first delta has id, type, name and empty arguments; the later ones only
    // the index and an arguments fragment.
    std::vector<std::string> names(2), ids(2), args(2);
    std::vector<std::optional<size_t>> first_token(2);
    for (size_t i = 0; i < s.call_deltas.size(); ++i) {
      const Json& d = s.call_deltas[i];
      CAPTURE(d.dump());
      const size_t index = d["index"];
      REQUIRE(index < 2);
      if (!first_token[index]) {
        first_token[index] = s.call_delta_tokens[i];
        CHECK(d["id"].get<std::string>().rfind("call_", 0) == 0);
        CHECK(d["type"] == "function");
        CHECK(d["function"]["arguments"] == "");
        ids[index] = d["id"];
        names[index] = d["function"]["name"];
      } else {
        CHECK(d.size() == 2);
        CHECK(d["function"].size() == 1);
        REQUIRE(d["function"]["arguments"].is_string());
      }
      args[index] += d["function"]["arguments"].get<std::string>();
    }
    CHECK(names == std::vector<std::string>{"get_weather", "save_file"});
    CHECK(ids[0] != ids[1]);
    CHECK(args[0] == R"({"city":"Paris Nord","days":3})");
    CHECK(args[1] == R"({"filename":"007","tags":["a","b"]})");
    CHECK(Json::parse(args[0]) == Json::parse(R"({"city":"Paris Nord","days":3})"));

    // Streamed, not buffered: the first call is announced before its parameters are read and
    // its city fragment goes out before the days parameter is written; both before its end.
    const size_t call0_end = TokensThrough(kToolOutput, kNs + "</invoke>");
    const size_t days_begin = TokensThrough(kToolOutput, kNs + "<days>");
    REQUIRE(first_token[0]);
    CHECK(*first_token[0] < TokensThrough(kToolOutput, kNs + "<city>") + per_response);
    CHECK(*first_token[0] < call0_end);
    bool city_early = false;
    for (size_t i = 0; i < s.call_deltas.size(); ++i) {
      if (s.call_deltas[i]["function"].value("arguments", "") == R"({"city":"Paris Nord")") {
        city_early = s.call_delta_tokens[i] < days_begin + per_response;
      }
    }
    CHECK(city_early);
    REQUIRE(first_token[1]);
    CHECK(*first_token[1] < TokensThrough(kToolOutput, "</tool_call>"));
  }
}

TEST_CASE("thinking enabled, whole response: whole calls and finish_reason tool_calls") {
  const Run run = Generate(Request("enabled", false), kToolOutput);
  REQUIRE(run.status == 200);
  const Json r = Json::parse(run.body);
  const Json& choice = r["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  const Json& m = choice["message"];
  CHECK(m["reasoning_content"] == "The user wants the weather; call the tool.");
  CHECK(m["content"] == "Let me check.");
  REQUIRE(m["tool_calls"].size() == 2);
  const Json& c0 = m["tool_calls"][0];
  CHECK(c0.size() == 3);  // id, type, function: no index outside streams
  CHECK(c0["id"].get<std::string>().rfind("call_", 0) == 0);
  CHECK(c0["type"] == "function");
  CHECK(c0["function"]["name"] == "get_weather");
  CHECK(c0["function"]["arguments"] == R"({"city":"Paris Nord","days":3})");
  CHECK(m["tool_calls"][1]["function"]["name"] == "save_file");
  CHECK(m["tool_calls"][1]["function"]["arguments"] == R"({"filename":"007","tags":["a","b"]})");
  CHECK_FALSE(
      HasSpecialText(m["content"].get<std::string>() + m["reasoning_content"].get<std::string>()));
}

TEST_CASE("thinking disabled and adaptive: where the reasoning starts") {
  struct Case {
    std::string mode, output, reasoning, content;
  };
  const std::vector<Case> cases = {
      // Disabled: the prompt closed reasoning; everything is content.
      {"disabled", "Sunny, 20 degrees.", "", "Sunny, 20 degrees."},
      // Adaptive without thinking: one leading bare closer is dropped.
      {"adaptive", "</mm:think>Sunny.", "", "Sunny."},
      // Adaptive with thinking: the model opens and closes the block itself.
      {"adaptive", "<mm:think>Easy one.</mm:think>Sunny.", "Easy one.", "Sunny."},
      {"", "<mm:think>Easy one.</mm:think>Sunny.", "Easy one.", "Sunny."},
      // Enabled, the output starts inside reasoning.
      {"enabled", "Think.</mm:think>Sunny.", "Think.", "Sunny."},
  };
  for (const Case& c : cases) {
    for (bool stream : {false, true}) {
      CAPTURE(c.mode);
      CAPTURE(c.output);
      CAPTURE(stream);
      const Run run = Generate(Request(c.mode, stream, /*tools=*/false), c.output);
      std::string reasoning, content, finish;
      if (stream) {
        const Streamed s = Read(run);
        reasoning = s.reasoning;
        content = s.content;
        REQUIRE(s.finishes.size() == 1);
        finish = s.finishes[0];
        CHECK(s.call_deltas.empty());
      } else {
        REQUIRE(run.status == 200);
        const Json m = Json::parse(run.body)["choices"][0]["message"];
        reasoning = m.value("reasoning_content", Json(nullptr)).is_string()
                        ? m["reasoning_content"].get<std::string>()
                        : "";
        content = m["content"].is_string() ? m["content"].get<std::string>() : "";
        finish = Json::parse(run.body)["choices"][0]["finish_reason"];
      }
      CHECK(reasoning == c.reasoning);
      CHECK(content == c.content);
      CHECK(finish == "stop");
    }
  }
}
