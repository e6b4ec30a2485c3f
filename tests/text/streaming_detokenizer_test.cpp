// StreamingDetokenizer: ids fed one by one must give exactly the one-shot Decode, never a split
// UTF-8 character, with and without skip_special_tokens, for every test tokenizer.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "gateway/text/streaming_detokenizer.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::text::DetokenizerOptions;
using m3::text::StreamingDetokenizer;
using m3::tok::Tokenizer;

namespace {

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Streams `ids`; checks every delta is whole UTF-8 and returns the concatenation.
std::string Stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   size_t* nonempty_deltas = nullptr) {
  StreamingDetokenizer d(tok, DetokenizerOptions{skip, {}});
  std::string out;
  size_t n = 0;
  for (int32_t id : ids) {
    std::string delta = d.Push(id);
    CHECK(ValidUtf8(delta));
    n += !delta.empty();
    out += delta;
  }
  out += d.Flush();
  if (nonempty_deltas) *nonempty_deltas = n;
  return out;
}

void CheckEncodingsFile(const std::string& tokenizer_path, const std::string& encodings_path) {
  Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath(tokenizer_path));
  auto cases = nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath(encodings_path)));
  REQUIRE(cases.size() > 0);
  for (const auto& c : cases) {
    for (const char* key : {"ids", "ids_with_special"}) {
      if (!c.contains(key)) continue;
      auto ids = c[key].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        INFO(encodings_path << " text=" << c["text"].get<std::string>() << " " << key
                            << " skip=" << skip);
        CHECK(Stream(tok, ids, skip) == tok.Decode(ids, skip));
      }
    }
  }
}

}  // namespace

TEST_CASE("streaming equals one-shot decode on the MiniMax tokenizer encodings") {
  CheckEncodingsFile("tokenizer/tokenizer.json", "tokenizer/encodings.json");
  CheckEncodingsFile("tokenizer/tokenizer.json", "tokenizer/minimax.encodings.json");
}

TEST_CASE("streaming equals one-shot decode for other decoders (Metaspace, Strip, ...)") {
  CheckEncodingsFile("tokenizer/retrained/tokenizer.json", "tokenizer/retrained/encodings.json");
  for (const char* v : {"metaspace", "bytelevel_digits", "prepend_replace"}) {
    CheckEncodingsFile(std::string("tokenizer/variants/") + v + ".tokenizer.json",
                       std::string("tokenizer/variants/") + v + ".encodings.json");
  }
}

TEST_CASE("multi-byte characters split over several byte-level tokens are held back") {
  Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  const std::string text =
      "Party 🎉👍🏽🇫🇷 café 你好世界 𝔘𝔫𝔦𝔠𝔬𝔡𝔢!";
  auto ids = tok.Encode(text);
  // The point of the test: some tokens are not whole characters on their own.
  size_t partial_tokens = 0;
  for (int32_t id : ids) {
    std::vector<int32_t> one{id};
    partial_tokens += tok.Decode(one).find("\xEF\xBF\xBD") != std::string::npos;
  }
  REQUIRE(partial_tokens > 0);
  size_t deltas = 0;
  CHECK(Stream(tok, ids, false, &deltas) == text);
  CHECK(deltas > 1);  // text is emitted as it becomes final, not at the end

  // A token sequence cut inside a character: the tail comes out as U+FFFD at the end, like
  // Decode does.
  std::vector<int32_t> cut;
  for (int32_t id : ids) {
    cut.push_back(id);
    if (tok.Decode(cut).ends_with("\xEF\xBF\xBD")) break;
  }
  REQUIRE(tok.Decode(cut).ends_with("\xEF\xBF\xBD"));
  StreamingDetokenizer d(tok);
  std::string out;
  for (int32_t id : cut) out += d.Push(id);
  CHECK_FALSE(out.ends_with("\xEF\xBF\xBD"));
  out += d.Flush();
  CHECK(out == tok.Decode(cut));
}

TEST_CASE("skip_special_tokens drops special tokens, keep list keeps chosen ones") {
  Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  auto ids = tok.Encode("<think>\nhmm</think>\n\nHi[e~[", false);
  const int32_t think = *tok.TokenToId("<think>"), end_think = *tok.TokenToId("</think>");
  REQUIRE(tok.IsSpecial(think));
  CHECK(Stream(tok, ids, true) == "\nhmm\n\nHi");
  StreamingDetokenizer d(tok, DetokenizerOptions{true, {think, end_think}});
  std::string out;
  for (int32_t id : ids) out += d.Push(id);
  out += d.Flush();
  CHECK(out == "<think>\nhmm</think>\n\nHi");
}

TEST_CASE("random id sequences: streaming still equals one-shot decode") {
  Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(tok.VocabSize()) - 1);
  // Single-byte tokens of the byte-level alphabet make invalid and partial sequences likely.
  std::vector<int32_t> bytes;
  for (int b = 0; b < 256; ++b) {
    auto ids = tok.Encode(std::string(1, static_cast<char>(b)));
    if (ids.size() == 1) bytes.push_back(ids[0]);
  }
  std::uniform_int_distribution<size_t> pick_byte(0, bytes.size() - 1);
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> ids;
    for (int k = 0; k < 40; ++k) ids.push_back(k % 3 ? any(rng) : bytes[pick_byte(rng)]);
    CHECK(Stream(tok, ids, false) == tok.Decode(ids));
    CHECK(Stream(tok, ids, true) == tok.Decode(ids, true));
  }
}

TEST_CASE("an id outside the vocabulary is an error") {
  Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  StreamingDetokenizer d(tok);
  CHECK_THROWS_AS(d.Push(static_cast<int32_t>(tok.VocabSize())), m3::Error);
  CHECK_THROWS_AS(d.Push(-1), m3::Error);
}
