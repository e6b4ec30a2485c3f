// m3::unicode UTF-8 tests: round trips, validation, and lossy repair / decoding that must
// match Python's bytes.decode('utf-8', 'replace') (expected values taken from CPython 3.11).
#include <doctest/doctest.h>

#include <string>

#include "gateway/unicode/utf8.h"

namespace u = m3::unicode;

TEST_CASE("encode and decode round trip every length class") {
  const std::u32string cps = {U'a',   0x7F,   0x80,   0xE9,    0x7FF,   0x800,
                              0x20AC, 0xFFFD, 0xFFFF, 0x10000, 0x1F389, 0x10FFFF};
  const std::string utf8 = u::Encode(cps);
  CHECK(utf8.size() == 2 + 2 * 3 + 3 * 4 + 4 * 3);
  CHECK(u::IsValidUtf8(utf8));
  CHECK(u::DecodeLossy(utf8) == cps);
  CHECK(u::CountCodePoints(utf8) == cps.size());
  size_t i = 0;
  for (char32_t c : cps) {
    const size_t start = i;
    CHECK(u::Utf8Length(static_cast<unsigned char>(utf8[i])) == u::NextCodePointEnd(utf8, i) - i);
    CHECK(u::NextCodePoint(utf8, i) == c);
    CHECK(u::PrevCodePointStart(utf8, i) == start);
  }
  CHECK(i == utf8.size());
}

TEST_CASE("AppendUtf8 writes the shortest form") {
  std::string s;
  u::AppendUtf8(s, 0xE9);
  u::AppendUtf8(s, 0x1F600);
  CHECK(s == "\xC3\xA9\xF0\x9F\x98\x80");
}

TEST_CASE("validation rejects overlongs, surrogates, out-of-range and truncation") {
  CHECK(u::IsValidUtf8(""));
  CHECK(u::IsValidUtf8("plain ascii text, longer than eight bytes"));
  CHECK(u::IsValidUtf8("h\xC3\xA9llo \xE2\x82\xAC"));
  CHECK_FALSE(u::IsValidUtf8("\xC0\xAF"));
  CHECK_FALSE(u::IsValidUtf8("\xE0\x80\x80"));
  CHECK_FALSE(u::IsValidUtf8("\xED\xA0\x80"));
  CHECK_FALSE(u::IsValidUtf8("\xF4\x90\x80\x80"));
  CHECK_FALSE(u::IsValidUtf8("abcdefgh\xE2\x82"));
  CHECK_FALSE(u::IsValidUtf8("\x80"));
}

TEST_CASE("lossy decoding replaces maximal invalid subparts like Python") {
  struct Case {
    std::string in;
    std::u32string out;
  };
  const Case cases[] = {
      {"\xFF", U"\uFFFD"},
      {"\xC3", U"\uFFFD"},
      {"a\xE2\x82", U"a\uFFFD"},
      {"\xE2\x82\xE2\x82\xAC", U"\uFFFD\u20AC"},
      {"\xF0\x9F\x98", U"\uFFFD"},
      {"\xED\xA0\x80", U"\uFFFD\uFFFD\uFFFD"},
      {"\xC0\xAF", U"\uFFFD\uFFFD"},
      {"\xF4\x90\x80\x80", U"\uFFFD\uFFFD\uFFFD\uFFFD"},
      {"\xF0\x80\x80\x80", U"\uFFFD\uFFFD\uFFFD\uFFFD"},
      {"\xE0\x80\x80", U"\uFFFD\uFFFD\uFFFD"},
      {"\x80\x80", U"\uFFFD\uFFFD"},
      {"\xF8\x88\x80\x80\x80", U"\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(u::DecodeLossy(c.in) == c.out);
    const std::string repaired = u::RepairUtf8(c.in);
    CHECK(u::IsValidUtf8(repaired));
    CHECK(u::DecodeLossy(repaired) == c.out);
  }
  CHECK(u::RepairUtf8("ok \xC3\xA9") == "ok \xC3\xA9");
}

TEST_CASE("boundary helpers never run past invalid input") {
  const std::string s = "\x80\x80\xC3";
  CHECK(u::NextCodePointEnd(s, 0) == 2);
  CHECK(u::NextCodePointEnd(s, 2) == 3);
  CHECK(u::CountCodePoints(s) == 1);
  CHECK(u::IsAscii("abc"));
  CHECK_FALSE(u::IsAscii("ab\xC3\xA9"));
}
