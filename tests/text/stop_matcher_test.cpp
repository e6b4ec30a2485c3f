// StopMatcher: stop strings across chunk boundaries, withheld prefixes, include_stop_str, tokens.
#include <doctest/doctest.h>

#include "gateway/text/stop_matcher.h"
#include "shared/error.h"
#include "tests/text/stream_util.h"

using m3::text::StopMatcher;
using m3::text::StopOptions;

namespace {

struct Run {
  std::string text;
  std::optional<std::string> stop;
};

Run Feed(const StopOptions& opts, const std::vector<std::string>& chunks) {
  StopMatcher m(opts);
  Run r;
  for (const auto& c : chunks) {
    r.text += m.Push(c);
    if (m.stopped()) break;
  }
  if (!m.stopped()) r.text += m.Flush();
  if (m.match()) r.stop = m.match()->stop_string;
  return r;
}

}  // namespace

TEST_CASE("a stop string split across chunks ends the output before it") {
  StopMatcher m({{"STOP"}, {}, false});
  CHECK(m.Push("Hello ST") == "Hello ");
  CHECK_FALSE(m.stopped());
  CHECK(m.Push("O") == "");
  CHECK(m.Push("P and more") == "");
  REQUIRE(m.stopped());
  CHECK(m.match()->stop_string == "STOP");
  CHECK(m.Push("ignored") == "");
}

TEST_CASE("withheld text is released once it can no longer match") {
  StopMatcher m({{"STOP"}, {}, false});
  CHECK(m.Push("ab S") == "ab ");
  CHECK(m.Push("T") == "");
  CHECK(m.Push("x") == "STx");
  CHECK(m.Push("ST") == "");
  CHECK(m.Flush() == "ST");  // end of generation without a stop: nothing is lost
  CHECK_FALSE(m.stopped());
}

TEST_CASE("stop at the very start and at the very end") {
  CHECK(Feed({{"<|end|>"}, {}, false}, {"<|end|>tail"}).text == "");
  CHECK(Feed({{"<|end|>"}, {}, false}, {"<|", "end", "|>"}).text == "");
  auto r = Feed({{"END"}, {}, false}, {"abc", "EN", "D"});
  CHECK(r.text == "abc");
  CHECK(r.stop == "END");
}

TEST_CASE("include_stop_str_in_output keeps the stop string") {
  auto r = Feed({{"STOP"}, {}, true}, {"a S", "TOP b"});
  CHECK(r.text == "a STOP");
  CHECK(r.stop == "STOP");
}

TEST_CASE("the first stop string to complete wins, whatever the chunking") {
  StopOptions opts{{"abcd", "bc", "xyz"}, {}, false};
  std::string text = "zzabcdxyz";
  auto one_shot = Feed(opts, {text});
  CHECK(one_shot.text == "zza");
  CHECK(one_shot.stop == "bc");
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    auto r = Feed(opts, m3::test::RandomChunks(text, rng));
    CHECK(r.text == one_shot.text);
    CHECK(r.stop == one_shot.stop);
  }
  // On a tie of completion the longer stop string wins (it truncates more).
  auto tie = Feed({{"cd", "abcd"}, {}, false}, {"xab", "cd"});
  CHECK(tie.text == "x");
  CHECK(tie.stop == "abcd");
}

TEST_CASE("multi-byte stop strings and overlapping prefixes") {
  auto r = Feed({{"。结束"}, {}, false}, m3::test::CharChunks("好的。结。结束了"));
  CHECK(r.text == "好的。结");
  CHECK(r.stop == "。结束");
  // "aab" after "aa": the withheld "aa" must keep the second 'a' as a live prefix.
  auto r2 = Feed({{"aab"}, {}, false}, {"a", "a", "a", "b"});
  CHECK(r2.text == "a");
}

TEST_CASE("stop token ids") {
  StopMatcher m({{"X"}, {2, 7}, false});
  CHECK(m.IsStopToken(7));
  CHECK_FALSE(m.IsStopToken(3));
  m.StopOnToken(7);
  REQUIRE(m.stopped());
  CHECK(m.match()->stop_token_id == 7);
  CHECK_FALSE(m.match()->stop_string.has_value());
}

TEST_CASE("an empty stop string is rejected") {
  CHECK_THROWS_AS(StopMatcher({{""}, {}, false}), m3::Error);
}
