// The hand-compiled split scanners must find exactly the matches PCRE2 finds for the same
// pattern, on the corpus and on random strings over a mixed alphabet.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "gateway/tokenizer/regex.h"
#include "gateway/tokenizer/split_scanners.h"
#include "gateway/unicode/utf8.h"
#include "tests/test_util.h"

namespace {

using m3::tok::SplitScanner;
using Matches = std::vector<std::pair<size_t, size_t>>;

Matches Scan(const SplitScanner& s, const std::string& text) {
  Matches m;
  s.ForEachMatch(text, [&](size_t a, size_t b) { m.emplace_back(a, b); });
  return m;
}

void Compare(SplitScanner::Kind kind, const char* pattern) {
  const SplitScanner scanner(kind);
  const m3::tok::Regex regex(pattern);
  auto strings =
      nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath("tokenizer/corpus.json")))
          .get<std::vector<std::string>>();
  // Letters, digits, marks, punctuation, symbols, emoji and every kind of space or newline the
  // patterns treat specially (U+180E is left out: PCRE2 still counts it as a space).
  const std::vector<char32_t> alphabet = {
      'a',     'Z',    's',    'S',    't',    'r',    'e',    'v',   'm',    'l',    'd',
      'x',     '0',    '7',    '\'',   ' ',    ' ',    '\t',   '\n',  '\r',   '\v',   '\f',
      '.',     ',',    '!',    '-',    '_',    '(',    '"',    0xA0,  0x85,   0x2003, 0x3000,
      0x2028,  0x17F,  0xE9,   0x301,  0x4E2D, 0x3042, 0xD55C, 0x661, 0x00B2, 0x2167, 0x1F600,
      0x1F44D, 0x200D, 0xFE0F, 0x2014, 0x201C, 0x0627, 0x0E48};
  std::mt19937 rng(1234);
  for (int k = 0; k < 3000; ++k) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int c = 0; c < len; ++c) m3::unicode::AppendUtf8(s, alphabet[rng() % alphabet.size()]);
    strings.push_back(std::move(s));
  }
  size_t same = 0;
  for (const auto& s : strings) {
    Matches expected;
    regex.FindAll(s, expected);
    if (Scan(scanner, s) == expected) {
      ++same;
    } else {
      MESSAGE("scanner differs from PCRE2 on " << nlohmann::json(s).dump());
    }
  }
  CHECK(same == strings.size());
}

}  // namespace

TEST_CASE("GPT-2 scanner equals PCRE2") {
  Compare(SplitScanner::Kind::kGpt2, SplitScanner::Gpt2Pattern());
}

TEST_CASE("Llama-3 scanner equals PCRE2") {
  Compare(SplitScanner::Kind::kLlama3, SplitScanner::Llama3Pattern());
}

TEST_CASE("known patterns are recognised, others are not") {
  CHECK(SplitScanner::ForPattern(SplitScanner::Gpt2Pattern()) != nullptr);
  CHECK(SplitScanner::ForPattern(SplitScanner::Llama3Pattern()) != nullptr);
  CHECK(SplitScanner::ForPattern("\\s+") == nullptr);
}
