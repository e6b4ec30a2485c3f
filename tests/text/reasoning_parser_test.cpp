// ReasoningParser: <think> splitting with tags split across chunks, both starting modes.
#include <doctest/doctest.h>

#include "gateway/text/reasoning_parser.h"
#include "tests/text/stream_util.h"

using m3::text::ReasoningOptions;
using m3::text::ReasoningParser;

namespace {

struct Split {
  std::string reasoning, content;
};

Split Feed(const ReasoningOptions& opts, const std::vector<std::string>& chunks) {
  ReasoningParser p(opts);
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

void CheckAllChunkings(const ReasoningOptions& opts, const std::string& text,
                       const std::string& reasoning, const std::string& content) {
  auto one = Feed(opts, {text});
  CHECK(one.reasoning == reasoning);
  CHECK(one.content == content);
  auto chars = Feed(opts, m3::test::CharChunks(text));
  CHECK(chars.reasoning == reasoning);
  CHECK(chars.content == content);
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    auto r = Feed(opts, m3::test::RandomChunks(text, rng, 6));
    CHECK(r.reasoning == reasoning);
    CHECK(r.content == content);
  }
}

}  // namespace

TEST_CASE("output that starts inside <think> (MiniMax generation prompt)") {
  CheckAllChunkings({}, "Let me think.\nStep 2.\n</think>\n\nThe answer is 4.",
                    "Let me think.\nStep 2.", "The answer is 4.");
}

TEST_CASE("a model that repeats the <think> the prompt opened") {
  CheckAllChunkings({}, "<think>\nplan\n</think>\n\nanswer", "plan", "answer");
  CheckAllChunkings({}, "<thin", "<thin", "");
  CheckAllChunkings({}, "<b>bold</think>x", "<b>bold", "x");
}

TEST_CASE("explicit <think> in the output") {
  ReasoningOptions opts;
  opts.starts_in_reasoning = false;
  CheckAllChunkings(opts, "<think>\nhmm, 2+2\n</think>\n\nIt is 4.", "hmm, 2+2", "It is 4.");
  CheckAllChunkings(opts, "No reasoning here.", "", "No reasoning here.");
  CheckAllChunkings(opts, "pre <think>r</think>post", "r", "pre post");
}

TEST_CASE("tags split across tokens and look-alikes") {
  ReasoningParser p;
  auto d1 = p.Push("abc </th");
  CHECK(d1.reasoning == "abc ");
  auto d2 = p.Push("ink>");
  CHECK(d2.reasoning == "");
  CHECK_FALSE(p.in_reasoning());
  CHECK(p.Push("X").content == "X");

  CheckAllChunkings({}, "a </this> b\n\nc</think>d", "a </this> b\n\nc", "d");
  CheckAllChunkings({}, "x <think> y</think>z", "x <think> y", "z");
}

TEST_CASE("unterminated reasoning and newline handling") {
  CheckAllChunkings({}, "still thinking\n", "still thinking\n", "");
  CheckAllChunkings({}, "\n\na\n\nb\n</think>\n\n\nc\nd\n", "a\n\nb", "c\nd\n");
  ReasoningOptions raw;
  raw.strip_newlines = false;
  CheckAllChunkings(raw, "\na\n</think>\n\nc", "\na\n", "\n\nc");
}
