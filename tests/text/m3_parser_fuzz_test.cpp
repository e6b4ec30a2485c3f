// Deterministic fuzzing of the output parsers: random byte strings built from the markers of
// both formats, broken tags and arbitrary bytes go through the M3 and M2 tool-call parsers, the
// M3 reasoning parser and the whole output chain (random token ids of the M3 test tokenizer).
// Nothing may crash, the result must not depend on how the input is chunked, no text may be
// invented, text without markers must come back whole, tool-call arguments must be JSON objects,
// and the valid calls around malformed ones must all come back. M3_FUZZ_ITERATIONS raises the
// case count for long runs (README.md: the run under ASan).
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "gateway/text/chat_format.h"
#include "gateway/text/m3_tool_call_parser.h"
#include "gateway/text/output_parser.h"
#include "gateway/text/reasoning_parser.h"
#include "gateway/text/tool_call_parser.h"
#include "tests/test_util.h"

using Json = nlohmann::ordered_json;

namespace {

const std::string NS = "]<]minimax[>[";

int Iterations(int fallback) {
  const char* env = std::getenv("M3_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : fallback;
}

const std::vector<std::string>& Fragments() {
  static const std::vector<std::string> f = {NS,
                                             NS,
                                             NS,
                                             "<tool_call>",
                                             "</tool_call>",
                                             "<invoke name=\"f\">",
                                             "<invoke name=",
                                             "\"g\"",
                                             "</invoke>",
                                             "<a>",
                                             "</a>",
                                             "<item>",
                                             "</item>",
                                             "<b-c>",
                                             "</b-c>",
                                             "<mm:think>",
                                             "</mm:think>",
                                             "<think>",
                                             "</think>",
                                             "<minimax:tool_call>",
                                             "</minimax:tool_call>",
                                             "<invoke name=\"f\">",
                                             "<parameter name=\"p\">",
                                             "</parameter>",
                                             " ",
                                             "\n",
                                             "\t",
                                             "<",
                                             ">",
                                             "/",
                                             "\"",
                                             "=",
                                             "x",
                                             "12",
                                             "true",
                                             "{\"k\": [1]}",
                                             "é",
                                             "中",
                                             "🙂",
                                             "]<]",
                                             "[>[",
                                             "minimax"};
  return f;
}

std::string RandomInput(std::mt19937& rng) {
  std::uniform_int_distribution<int> pieces(0, 40);
  std::string s;
  for (int n = pieces(rng); n > 0; --n) {
    if (rng() % 8 == 0) {
      s.push_back(static_cast<char>(rng() & 0xff));  // arbitrary bytes, invalid UTF-8 included
    } else {
      s += Fragments()[rng() % Fragments().size()];
    }
  }
  return s;
}

std::vector<std::string> ByteChunks(const std::string& s, std::mt19937& rng) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 1 + rng() % 7;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool IsSubsequence(const std::string& small, const std::string& big) {
  size_t j = 0;
  for (char c : big) {
    if (j < small.size() && small[j] == c) ++j;
  }
  return j == small.size();
}

struct ToolResult {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const ToolResult&) const = default;
};

template <class Parser>
ToolResult RunTools(Parser&& p, const std::vector<std::string>& chunks) {
  ToolResult r;
  auto take = [&](m3::text::ToolCallDelta d) {
    r.content += d.content;
    for (auto& c : d.calls) {
      if (c.index < r.calls.size()) {
        r.calls[c.index].second += c.arguments;
      } else {
        REQUIRE(c.index == r.calls.size());
        r.calls.emplace_back(c.name, c.arguments);
      }
    }
  };
  for (const auto& c : chunks) take(p.Push(c));
  take(p.Flush());
  return r;
}

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
    "b-c": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}}])");

}  // namespace

TEST_CASE("fuzz: tool-call parsers on random input: chunking-invariant, nothing invented or lost") {
  std::mt19937 rng(20261128);
  const int n = Iterations(3000);
  for (int i = 0; i < n; ++i) {
    const std::string input = RandomInput(rng);
    CAPTURE(input);
    {
      auto make = [] {
        return m3::text::M3ToolCallParser(m3::text::ToolSchema(kTools),
                                          [](size_t k) { return "id" + std::to_string(k); });
      };
      const ToolResult whole = RunTools(make(), {input});
      CHECK(RunTools(make(), ByteChunks(input, rng)) == whole);
      std::vector<std::string> bytes;
      for (char c : input) bytes.emplace_back(1, c);
      CHECK(RunTools(make(), bytes) == whole);
      CHECK(IsSubsequence(whole.content, input));
      if (input.find(NS) == std::string::npos) CHECK(whole.content == input);
      for (const auto& [name, args] : whole.calls) {
        CAPTURE(args);
        Json j = Json::parse(args, nullptr, false);
        CHECK(j.is_object());
        CHECK(!name.empty());
      }
    }
    {
      auto make = [] { return m3::text::ToolCallParser(m3::text::ToolSchema(kTools)); };
      const ToolResult whole = RunTools(make(), {input});
      const ToolResult chunked = RunTools(make(), ByteChunks(input, rng));
      CHECK(chunked.content == whole.content);
      CHECK(chunked.calls.size() == whole.calls.size());
      if (input.find("<minimax:tool_call>") == std::string::npos) CHECK(whole.content == input);
    }
  }
}

TEST_CASE("fuzz: M3 reasoning split on random input") {
  std::mt19937 rng(35);
  const int n = Iterations(3000);
  for (int i = 0; i < n; ++i) {
    const std::string input = RandomInput(rng);
    CAPTURE(input);
    const char* ends[] = {"", "<mm:think>", "</mm:think>"};
    const auto o =
        m3::text::ReasoningOptionsFor(m3::text::ReasoningSyntax::kMiniMaxM3, ends[i % 3]);
    auto run = [&](const std::vector<std::string>& chunks) {
      m3::text::ReasoningParser p(o);
      std::pair<std::string, std::string> r;
      for (const auto& c : chunks) {
        auto d = p.Push(c);
        r.first += d.reasoning;
        r.second += d.content;
      }
      auto d = p.Flush();
      r.first += d.reasoning;
      r.second += d.content;
      return r;
    };
    const auto whole = run({input});
    CHECK(run(ByteChunks(input, rng)) == whole);
    CHECK(IsSubsequence(whole.first, input));
    CHECK(IsSubsequence(whole.second, input));
    if (input.find("mm:think>") == std::string::npos) {
      CHECK((o.starts_in_reasoning ? whole.first : whole.second) == input);
    }
    // Exactly the tags are taken out: nothing else is dropped.
    CHECK(whole.first.size() + whole.second.size() <= input.size());
    std::string rest = input;
    size_t tags = 0;
    for (const std::string tag : {"<mm:think>", "</mm:think>"}) {
      for (size_t p = rest.find(tag); p != std::string::npos; p = rest.find(tag, p)) {
        ++tags;
        p += tag.size();
      }
    }
    CHECK(input.size() - whole.first.size() - whole.second.size() <= tags * 11);
  }
}

TEST_CASE("fuzz: valid M3 calls around malformed ones all come back, in order") {
  std::mt19937 rng(51075);
  const int n = Iterations(1500);
  for (int i = 0; i < n; ++i) {
    std::string text = "lead " + NS + "<tool_call>\n";
    std::vector<std::string> expected;
    for (int k = 1 + static_cast<int>(rng() % 5); k > 0; --k) {
      if (rng() % 3 == 0) {
        // A malformed invoke: a broken tag, then random fragments without invoke markers.
        std::string junk = NS + (rng() % 2 ? "<invoke nam=\"z\">" : "<invok>");
        for (int j = static_cast<int>(rng() % 6); j > 0; --j) {
          const std::string& f = Fragments()[rng() % Fragments().size()];
          if (f.find("invoke") == std::string::npos && f.find("tool_call") == std::string::npos)
            junk += f;
        }
        text += junk + NS + "</invoke>\n";
      } else {
        const int v = static_cast<int>(rng() % 1000);
        text += NS + "<invoke name=\"f\">" + NS + "<a>" + std::to_string(v) + NS + "</a>" + NS +
                "</invoke>\n";
        expected.push_back("{\"a\":" + std::to_string(v) + "}");
      }
    }
    text += NS + "</tool_call> tail";
    CAPTURE(text);
    m3::text::M3ToolCallParser whole_parser{m3::text::ToolSchema(kTools)};
    const ToolResult whole = RunTools(whole_parser, {text});
    m3::text::M3ToolCallParser chunk_parser{m3::text::ToolSchema(kTools)};
    CHECK(RunTools(chunk_parser, ByteChunks(text, rng)) == whole);
    REQUIRE(whole.calls.size() == expected.size());
    for (size_t k = 0; k < expected.size(); ++k) CHECK(whole.calls[k].second == expected[k]);
    CHECK(whole.content.starts_with("lead "));
    CHECK(whole.content.ends_with(" tail"));
  }
}

TEST_CASE("fuzz: the whole output chain on random token ids") {
  const auto tok = m3::tok::Tokenizer::FromFile(m3::test::DataPath("m3-chat/model/tokenizer.json"));
  const int32_t vocab = static_cast<int32_t>(tok.VocabSize());
  std::vector<int32_t> markers;
  for (const char* s : {"]<]minimax[>[", "<mm:think>", "</mm:think>", "[e~[", "]~b]"}) {
    markers.push_back(*tok.TokenToId(s));
  }
  std::mt19937 rng(4242);
  const int n = Iterations(400);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> ids;
    for (int k = static_cast<int>(rng() % 60); k > 0; --k) {
      ids.push_back(rng() % 4 == 0 ? markers[rng() % markers.size()]
                                   : static_cast<int32_t>(rng() % vocab));
    }
    for (bool skip : {true, false}) {
      m3::text::OutputParserOptions o;
      o.skip_special_tokens = skip;
      o.stop.stop_token_ids = {*tok.TokenToId("[e~[")};
      o.parse_tool_calls = true;
      o.tools = kTools;
      m3::text::ChatFormat f;
      f.reasoning = m3::text::ReasoningSyntax::kMiniMaxM3;
      f.tool_calls = m3::text::ToolCallSyntax::kMiniMaxM3;
      m3::text::ApplyChatFormat(f, i % 2 ? "]~b]ai\n<mm:think>" : "]~b]ai\n", o);
      m3::text::OutputParser one_by_one(tok, o), all_at_once(tok, o);
      std::string content, reasoning;
      for (int32_t id : ids) {
        auto d = one_by_one.Step(id);
        content += d.content;
        reasoning += d.reasoning_content;
      }
      auto d = one_by_one.Finish(m3::text::FinishReason::kLength);
      content += d.content;
      reasoning += d.reasoning_content;
      all_at_once.Step(std::span<const int32_t>(ids));
      all_at_once.Finish(m3::text::FinishReason::kLength);
      CHECK(content == one_by_one.result().content);
      CHECK(reasoning == one_by_one.result().reasoning_content);
      CHECK(all_at_once.result().content == one_by_one.result().content);
      CHECK(all_at_once.result().reasoning_content == one_by_one.result().reasoning_content);
      REQUIRE(all_at_once.result().tool_calls.size() == one_by_one.result().tool_calls.size());
      for (const auto& c : one_by_one.result().tool_calls) {
        CHECK(Json::parse(c.arguments, nullptr, false).is_object());
      }
      if (skip) {
        for (const char* s : {"]<]minimax[>[", "<mm:think>", "</mm:think>"}) {
          CHECK(one_by_one.result().content.find(s) == std::string::npos);
          CHECK(one_by_one.result().reasoning_content.find(s) == std::string::npos);
        }
      }
    }
  }
}
