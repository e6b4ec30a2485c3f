// ReasoningParser with MiniMax-M3's options (chat_format.h): <mm:think> tags split exactly, the
// start state from the prompt, one leading bare </mm:think> dropped, a later unmatched one kept.
#include <doctest/doctest.h>

#include <random>

#include "gateway/text/chat_format.h"
#include "gateway/text/reasoning_parser.h"
#include "tests/text/stream_util.h"

using m3::text::ReasoningOptions;
using m3::text::ReasoningParser;
using m3::text::ReasoningSyntax;

namespace {

struct Split {
  std::string reasoning, content;
};

Split Feed(const ReasoningOptions& o, const std::vector<std::string>& chunks) {
  ReasoningParser p(o);
  Split s;
  for (const auto& c : chunks) {
    auto d = p.Push(c);
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  auto d = p.Flush();
  s.reasoning += d.reasoning;
  s.content += d.content;
  return s;
}

Split FeedAll(const std::string& prompt_end, const std::string& text) {
  const ReasoningOptions o =
      m3::text::ReasoningOptionsFor(ReasoningSyntax::kMiniMaxM3, "]~b]ai\n" + prompt_end);
  Split one = Feed(o, {text});
  Split chars = Feed(o, m3::test::CharChunks(text));
  CHECK(chars.reasoning == one.reasoning);
  CHECK(chars.content == one.content);
  std::mt19937 rng(11);
  for (int i = 0; i < 10; ++i) {
    Split r = Feed(o, m3::test::RandomChunks(text, rng, 5));
    CHECK(r.reasoning == one.reasoning);
    CHECK(r.content == one.content);
  }
  return one;
}

}  // namespace

TEST_CASE("M3 reasoning: thinking enabled (the prompt opened <mm:think>)") {
  auto s = FeedAll("<mm:think>", "\nStep 1.\n\n</mm:think>\n\nAnswer\n");
  CHECK(s.reasoning == "\nStep 1.\n\n");  // exact: the M3 template adds no newlines
  CHECK(s.content == "\n\nAnswer\n");
  s = FeedAll("<mm:think>", "<mm:think>again</mm:think>x");
  CHECK(s.reasoning == "again");
  CHECK(s.content == "x");
  s = FeedAll("<mm:think>", "</mm:think>no thought");
  CHECK(s.reasoning.empty());
  CHECK(s.content == "no thought");
  s = FeedAll("<mm:think>", "cut off while thinking");
  CHECK(s.reasoning == "cut off while thinking");
}

TEST_CASE("M3 reasoning: adaptive and disabled") {
  for (const std::string prompt_end : {"", "</mm:think>"}) {
    CAPTURE(prompt_end);
    auto s = FeedAll(prompt_end, "</mm:think>Hello");
    CHECK(s.reasoning.empty());
    CHECK(s.content == "Hello");
    s = FeedAll(prompt_end, "<mm:think>think</mm:think>Hi");
    CHECK(s.reasoning == "think");
    CHECK(s.content == "Hi");
    s = FeedAll(prompt_end, "Hello </mm:think> world</mm:think>");
    CHECK(s.reasoning.empty());
    CHECK(s.content == "Hello </mm:think> world</mm:think>");
    s = FeedAll(prompt_end, "</mm:think></mm:think>x");  // only one leading closer is dropped
    CHECK(s.content == "</mm:think>x");
    s = FeedAll(prompt_end, "</mm:thin");
    CHECK(s.content == "</mm:thin");
    s = FeedAll(prompt_end, "A <mm:think>late</mm:think> B");
    CHECK(s.reasoning == "late");
    CHECK(s.content == "A  B");
  }
}

TEST_CASE("M3 reasoning start: only the end of the prompt counts") {
  using m3::text::DetectReasoningStart;
  using m3::text::ReasoningStart;
  // The system text shows <mm:think></mm:think> as an instruction (vLLM issue 46042).
  const std::string system = "wrap your reasoning in <mm:think></mm:think> tags[e~[\n]~b]ai\n";
  CHECK(DetectReasoningStart(system, "<mm:think>", "</mm:think>") == ReasoningStart::kAdaptive);
  CHECK(DetectReasoningStart(system + "<mm:think>", "<mm:think>", "</mm:think>") ==
        ReasoningStart::kInReasoning);
  CHECK(DetectReasoningStart(system + "</mm:think>", "<mm:think>", "</mm:think>") ==
        ReasoningStart::kClosed);
  CHECK(DetectReasoningStart(system + "<mm:think>\n", "<mm:think>", "</mm:think>") ==
        ReasoningStart::kInReasoning);
  CHECK(DetectReasoningStart("", "<mm:think>", "</mm:think>") == ReasoningStart::kAdaptive);
}
