// Tokenizer behaviour beyond the golden sets: bad input (invalid UTF-8, malformed or
// unsupported tokenizer.json, ids out of range), decode round trips, the vocabulary API and
// concurrent encoding.
#include <doctest/doctest.h>
#include <chrono>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gateway/tokenizer/tokenizer.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace {

using m3::tok::Tokenizer;
using nlohmann::json;

const Tokenizer& MiniMax() {
  static const Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  return tok;
}

std::vector<std::string> Corpus() {  // the strings of the reference sets
  return json::parse(m3::test::ReadFile(m3::test::DataPath("tokenizer/corpus.json")))
      .get<std::vector<std::string>>();
}

// A small BPE tokenizer.json (byte-level alphabet of "ab", one merge) with a given model type.
std::string TinyTokenizer(const std::string& model_type) {
  json j = {{"version", "1.0"},
            {"added_tokens", json::array()},
            {"normalizer", nullptr},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", nullptr},
            {"model",
             {{"type", model_type},
              {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}},
              {"merges", json::array({"a b"})}}}};
  return j.dump();
}

m3::ErrorCode CodeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const m3::Error& e) {
    return e.code();
  }
  FAIL("no m3::Error thrown");
  return m3::ErrorCode::kInternal;
}

}  // namespace

TEST_CASE("invalid UTF-8 is replaced like from_utf8_lossy, never crashes") {
  const auto& tok = MiniMax();
  // "a" + lone continuation + truncated 3-byte sequence + "b" + overlong + surrogate + F5.
  const std::string bad =
      "a\x80"
      "\xE2\x82"
      "b\xC0\xAF"
      "\xED\xA0\x80"
      "\xF5z";
  // Python's and Rust's lossy decoders agree: one U+FFFD per maximal invalid subsequence.
  const std::string r = "\xEF\xBF\xBD";
  const std::string repaired = "a" + r + r + "b" + r + r + r + r + r + r + "z";
  CHECK(tok.Encode(bad) == tok.Encode(repaired));
  CHECK(tok.Decode(tok.Encode(bad)) == repaired);
  // Every single byte and a truncated 4-byte sequence at the end.
  for (int b = 0; b < 256; ++b) {
    std::string s = "x";
    s.push_back(static_cast<char>(b));
    s.append("\xF0\x9F\x98");
    CHECK_NOTHROW(tok.Decode(tok.Encode(s)));
  }
}

TEST_CASE("random bytes never crash any tokenizer") {
  std::mt19937 rng(99);
  for (const char* path :
       {"tokenizer/tokenizer.json", "tokenizer/variants/metaspace.tokenizer.json",
        "tokenizer/variants/bytelevel_digits.tokenizer.json",
        "tokenizer/variants/prepend_replace.tokenizer.json"}) {
    const auto tok = Tokenizer::FromFile(m3::test::DataPath(path));
    for (int k = 0; k < 200; ++k) {
      std::string s(rng() % 64, '\0');
      for (auto& c : s)
        c = static_cast<char>(k % 2 ? rng() % 256 : " a\n<|>\xC3\xA9\xE2\x96\x81"[rng() % 11]);
      const auto ids = tok.Encode(s, k % 3 == 0);
      for (int32_t id : ids) REQUIRE(id >= 0);
      CHECK_NOTHROW(tok.Decode(ids, k % 2 == 0));
    }
  }
}

TEST_CASE("decode round-trips the corpus") {
  // NFC may rewrite a string, so the reference decoding (of the reference ids) is the target;
  // it equals the input for every string already in NFC.
  const auto& tok = MiniMax();
  const json rows =
      json::parse(m3::test::ReadFile(m3::test::DataPath("tokenizer/minimax.encodings.json")));
  size_t identical = 0;
  for (const auto& row : rows) {
    const std::string text = row["text"].get<std::string>();
    const std::string back = tok.Decode(tok.Encode(text));
    CHECK(back == row["decoded"].get<std::string>());
    identical += back == text;
  }
  CHECK(identical * 10 > rows.size() * 9);
}

TEST_CASE("special tokens: encode, skip on decode, vocabulary API") {
  const auto& tok = MiniMax();
  const auto think = tok.TokenToId("<think>");
  REQUIRE(think.has_value());
  CHECK(tok.IsSpecial(*think));
  CHECK(tok.IdToToken(*think) == "<think>");
  const auto ids = tok.Encode("<think>hi</think>");
  CHECK(ids.front() == *think);
  CHECK(tok.Decode(ids) == "<think>hi</think>");
  CHECK(tok.Decode(ids, true) == "hi");
  CHECK(tok.VocabSize() == 32000);
  const auto hello = tok.TokenToId("Hello");
  REQUIRE(hello.has_value());
  CHECK_FALSE(tok.IsSpecial(*hello));
  CHECK_FALSE(tok.TokenToId("no such token at all").has_value());
  CHECK(tok.IdToToken(-5).empty());
  CHECK(tok.Encode("").empty());
}

TEST_CASE("decode rejects ids outside the vocabulary") {
  const auto& tok = MiniMax();
  const std::vector<int32_t> negative = {1, -1};
  const std::vector<int32_t> too_big = {static_cast<int32_t>(tok.VocabSize())};
  CHECK(CodeOf([&] { tok.Decode(negative); }) == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf([&] { tok.Decode(too_big); }) == m3::ErrorCode::kInvalidArgument);
}

TEST_CASE("loading: malformed JSON, unsupported components, missing file") {
  CHECK(CodeOf([] { Tokenizer::FromJson("{\"model\": "); }) == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf([] { Tokenizer::FromJson("[1, 2]"); }) == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf([] { Tokenizer::FromJson("{}"); }) == m3::ErrorCode::kInvalidArgument);
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    try {
      Tokenizer::FromJson(TinyTokenizer(type));
      FAIL("loaded an unsupported model");
    } catch (const m3::Error& e) {
      CHECK(e.code() == m3::ErrorCode::kUnsupported);
      CHECK(std::string(e.what()).find(type) != std::string::npos);
    }
  }
  json j = json::parse(TinyTokenizer("BPE"));
  j["normalizer"] = {{"type", "BertNormalizer"}};
  try {
    Tokenizer::FromJson(j.dump());
    FAIL("loaded an unsupported normalizer");
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kUnsupported);
    CHECK(std::string(e.what()).find("BertNormalizer") != std::string::npos);
  }
  j = json::parse(TinyTokenizer("BPE"));
  j["model"]["merges"] = json::array({"a c"});
  CHECK(CodeOf([&] { Tokenizer::FromJson(j.dump()); }) == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf([] { Tokenizer::FromFile("/nonexistent/tokenizer.json"); }) ==
        m3::ErrorCode::kNotFound);
}

TEST_CASE("a minimal BPE without pre-tokenizer or decoder") {
  const auto tok = Tokenizer::FromJson(TinyTokenizer("BPE"));
  CHECK(tok.Encode("abba") == std::vector<int32_t>{2, 1, 0});
  CHECK(tok.Encode("xab") == std::vector<int32_t>{2});  // no unk token: unknown chars drop
  const std::vector<int32_t> ids = {2, 1};
  CHECK(tok.Decode(ids) == "ab b");  // no decoder: tokens joined by spaces
}

TEST_CASE("long words merge the same way as short ones") {
  const auto& tok = MiniMax();
  // Words past the linear-scan limit take the priority-queue path; both must agree with the
  // cached, per-piece result of the same word inside a sentence.
  std::string word;
  for (int i = 0; i < 300; ++i) word += static_cast<char>('a' + (i * 7) % 26);
  const auto alone = tok.Encode(word);
  const auto twice = tok.Encode(word + " " + word);
  REQUIRE(twice.size() > alone.size());
  CHECK(std::vector<int32_t>(twice.begin(), twice.begin() + alone.size()) == alone);
  CHECK(tok.Decode(alone) == word);
}

TEST_CASE("concurrent encoding gives the same ids as serial encoding") {
  const auto tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  const auto corpus = Corpus();
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : corpus) expected.push_back(tok.Encode(s));
  constexpr int kThreads = 6;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t k = 0; k < corpus.size(); ++k) {
          const size_t i = (k * (t + 1) + round) % corpus.size();  // a different order per thread
          if (tok.Encode(corpus[i]) != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
}

// One pre-tokenized word of 32 MB: its BPE symbols alone took ~1 GB; past the ids left it is
// over max_ids whatever it encodes to, so only a prefix that passes the limit is encoded.
TEST_CASE("max_ids: a word longer than the ids left can spell is not encoded whole") {
  const Tokenizer& tok = MiniMax();
  const std::string word(32u << 20, 'a');
  for (const size_t limit : {size_t{0}, size_t{10}, size_t{8192}}) {
    CAPTURE(limit);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> part = tok.Encode(word, false, limit);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(part.size() > limit);
    CHECK(part.size() < limit + 64 * 1024);
    std::printf("  %zu-byte word, max_ids %zu: %zu ids in %.3f s\n", word.size(), limit,
                part.size(), s);
    CHECK(s < 4.0);  // the whole word: 6.6 s and 2 GB (dev, 40 MB)
  }
  const std::string short_word(300, 'a');  // within the limit: the whole encoding
  CHECK(tok.Encode(short_word, false, 1000) == tok.Encode(short_word));
}

TEST_CASE("max_ids: encoding stops soon after the limit, on a prefix of the full encoding") {
  const Tokenizer& tok = MiniMax();
  std::string text;
  for (const std::string& s : Corpus()) text += s + "\n";
  while (text.size() < (4u << 20)) text += text;
  const std::vector<int32_t> full = tok.Encode(text);
  REQUIRE(full.size() > 1000);
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{100}, full.size() / 2}) {
    CAPTURE(limit);
    const std::vector<int32_t> part = tok.Encode(text, false, limit);
    CHECK(part.size() > limit);
    // Stopped within one pre-tokenized word of the limit, not at the end.
    CHECK(part.size() < limit + 64);
    CHECK(std::equal(part.begin(), part.begin() + static_cast<ptrdiff_t>(limit), full.begin()));
  }
  CHECK(tok.Encode(text, false, full.size()) == full);  // at the limit: the whole encoding
  CHECK(tok.Encode("hello", true, 1000) == tok.Encode("hello", true));
}
