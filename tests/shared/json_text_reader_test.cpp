// shared/json_text_reader.h through ParseBoundedJson: it accepts exactly what nlohmann's parser
// accepts and builds the same value (a differential check over hand-picked edge cases and
// random mutations of valid documents), its errors quote a few bytes rather than the token, a
// long number literal is refused, and a cancelled read stops within a MiB of text.
#include <doctest/doctest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/bounded_json.h"

namespace m3 {
namespace {

// Limits far past every input here: the comparison is of the grammar, not of the limits.
JsonLimits Open() {
  JsonLimits l;
  l.max_depth = 100000;
  l.max_object_keys = l.max_array_items = l.max_values = size_t{1} << 40;
  l.max_key_bytes = l.max_string_bytes = size_t{1} << 40;
  return l;
}

// Empty when ParseBoundedJson and nlohmann::json::parse agree on `text`.
std::string Disagreement(const std::string& text) {
  nlohmann::json theirs;
  bool they_accept = true;
  try {
    theirs = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    they_accept = false;
  }
  try {
    const nlohmann::json ours = ParseBoundedJson(text, Open());
    if (!they_accept) return "accepted what nlohmann refuses";
    // Compare the dumps: NaN-free, and -0.0 vs 0 stay distinct.
    if (ours.dump() != theirs.dump()) return "different value: " + ours.dump().substr(0, 200);
  } catch (const JsonBodyError& e) {
    // nlohmann's lexer takes a NUL byte for the end of the input ("0\0{{{" parses as 0); a raw
    // NUL is never JSON.
    const bool nul = text.find('\0') != std::string::npos;
    if (they_accept && !nul) return std::string("refused what nlohmann accepts: ") + e.what();
  }
  return "";
}

TEST_CASE("the reader accepts and builds what nlohmann's parser does") {
  const std::vector<std::string> cases = {
      "0",
      "-0",
      "1",
      "-1",
      "0.5",
      "-0.5e-3",
      "1E+2",
      "1e400",
      "-1e400",
      "1e-400",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775808",
      "-9223372036854775809",
      "123456789012345678901234567890",
      "01",
      "-",
      "1.",
      ".5",
      "1e",
      "+1",
      "0x10",
      "true",
      "false",
      "null",
      "tru",
      "nul",
      "truex",
      "[]",
      "{}",
      "[1,]",
      "[,1]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "{1:2}",
      "[1 2]",
      " [ 1 , 2 ] ",
      "\t\r\n{}\n",
      "",
      " ",
      "[",
      "]",
      "{\"a\":{\"b\":[true,false,null,{}]}}",
      "\"\"",
      "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
      "\"\\u0041\\u00e9\\u4e2d\"",
      "\"\\ud83d\\ude00\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"\\ud800\\u0041\"",
      "\"\\ud800\\udbff\"",
      "\"\\u00\"",
      "\"\\uZZZZ\"",
      "\"\\x\"",
      "\"\\u0000\"",
      std::string("\"a\0b\"", 5),
      std::string("0\0", 2),
      "\"\x1f\"",
      "\"\x7f\"",
      "\"\xc3\xa9\"",
      "\"\xc3\"",
      "\"\xc0\x80\"",
      "\"\xe0\x80\x80\"",
      "\"\xed\xa0\x80\"",
      "\"\xf0\x9f\x98\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xff\"",
      "\xef\xbb\xbf{}",
      "\xef\xbb{}",
      "{\"a\":1,\"a\":2}",
      "[1]x",
      "[1]]",
      "{\"\":\"\"}",
      "\"unterminated",
      "[\"a\\",
  };
  for (const std::string& text : cases) {
    CAPTURE(text);
    CHECK(Disagreement(text) == "");
  }
}

TEST_CASE("random mutations of valid documents: the reader agrees with nlohmann") {
  const std::vector<std::string> seeds = {
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9\n"}]}],"temperature":0.5,"n":-3,"stop":null,"x":[true,false,1e5,"\ud83d\ude00"]})",
      R"([{"a":[[[]]],"b":{"c":{}}},-0.0,12345678901234567890,"\\\"\/"])",
  };
  const std::string alphabet = "{}[],:\"\\0123456789.eE+-tfnulrsa \t\n\x80\xc3\xa9\xed\xff";
  std::mt19937 rng(39);
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = seeds[i % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text.erase(at, 1);
          break;
        case 1:
          text.insert(text.begin() + static_cast<ptrdiff_t>(at), alphabet[rng() % alphabet.size()]);
          break;
        default:
          text[at] = alphabet[rng() % alphabet.size()];
      }
    }
    const std::string d = Disagreement(text);
    if (!d.empty()) {
      CAPTURE(text);
      FAIL(d);
    }
    ++checked;
  }
  CHECK(checked == 20000);
}

TEST_CASE("errors quote a few bytes, long numbers are refused, and a read can be cancelled") {
  // One bad byte at the end of a 32 MiB string: refused fast, the message short.
  std::string big = "{\"x\":\"" + std::string(32u << 20, 'a') + "\xff\"}";
  auto t0 = std::chrono::steady_clock::now();
  try {
    (void)ParseBoundedJson(big);
    FAIL("accepted invalid UTF-8");
  } catch (const JsonBodyError& e) {
    CHECK(e.slug() == "invalid_json");
    CHECK(std::string(e.what()).size() < 200);
    CHECK(std::string(e.what()).find("byte 0xff") != std::string::npos);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("32 MiB string with a bad last byte: ", s, " s");
  CHECK(s < 1.0);

  try {
    (void)ParseBoundedJson("{\"temperature\":0." + std::string(5000, '1') + "}");
    FAIL("accepted a 5,002-character number");
  } catch (const JsonBodyError& e) {
    CHECK(e.slug() == "number_too_long");
    CHECK(e.field() == "temperature");
    CHECK(std::string(e.what()).find("'temperature'") != std::string::npos);
    CHECK(std::string(e.what()).size() < 300);
  }
  CHECK(ParseBoundedJson("0." + std::string(1000, '1')).is_number_float());

  // Cancelled: the read stops within a MiB of the question being answered yes.
  std::string many = "[";
  while (many.size() < (16u << 20)) many += "{\"a\":1},";
  many += "0]";
  int asked = 0;
  try {
    (void)ParseBoundedJson(many, {}, [&] { return ++asked == 3; });
    FAIL("a cancelled read finished");
  } catch (const JsonBodyError& e) {
    CHECK(e.slug() == "cancelled");
    CHECK(e.code() == ErrorCode::kUnavailable);
  }
  CHECK(asked == 3);
}

}  // namespace
}  // namespace m3
