// m3::unicode full case mapping against Python's str.upper/lower/title results (CPython 3.11),
// including the one-to-many mappings and Greek final sigma.
#include <doctest/doctest.h>

#include <string>

#include "gateway/unicode/case_mapping.h"
#include "gateway/unicode/utf8.h"

namespace u = m3::unicode;

namespace {

std::string Upper(const std::string& s) {
  return u::Encode(u::ToUpper(u::DecodeLossy(s)));
}
std::string Lower(const std::string& s) {
  return u::Encode(u::ToLower(u::DecodeLossy(s)));
}
std::string TitleOf(char32_t c) {
  std::u32string out;
  u::AppendTitle(out, c);
  return u::Encode(out);
}

}  // namespace

TEST_CASE("one-to-many uppercase mappings") {
  CHECK(Upper("straße") == "STRASSE");
  CHECK(Upper("\xEF\xAC\x81ne") == "FINE");  // U+FB01 ligature fi
  CHECK(Upper("\xEF\xAC\x83") == "FFI");
  CHECK(Upper("Բարև") == "ԲԱՐԵՒ");
  CHECK(Upper("\xEF\xAC\x93") == "ՄՆ");  // U+FB13
  CHECK(TitleOf(0xDF) == "Ss");
  CHECK(TitleOf(0xFB01) == "Fi");
  CHECK(TitleOf(0x0587) == "Եւ");
}

TEST_CASE("simple mappings of non-Latin scripts") {
  CHECK(Upper("ქართული") == "ᲥᲐᲠᲗᲣᲚᲘ");  // Georgian Mkhedruli -> Mtavruli
  CHECK(Lower("ᲥᲐᲠᲗᲣᲚᲘ") == "ქართული");
  CHECK(TitleOf(0x10D0) == "ა");       // Georgian letters titlecase to themselves
  CHECK(Lower("ᏣᎳᎩ") == "ꮳꮃꭹ");  // Cherokee
  CHECK(Upper("ꮳꮃꭹ") == "ᏣᎳᎩ");
  CHECK(Upper("привет") == "ПРИВЕТ");
  CHECK(Lower("ԲԱՐԵՎ") == "բարեվ");
  CHECK(TitleOf(0x01C6) == "ǅ");
  CHECK(Upper("ǆ") == "Ǆ");
}

TEST_CASE("Turkish dotless and dotted i follow the language-neutral rules") {
  CHECK(Upper("ı") == "I");
  CHECK(Lower("I") == "i");
  CHECK(Lower("İ") == "i\xCC\x87");  // i + combining dot above, as Python
  CHECK(Upper("i") == "I");
}

TEST_CASE("Greek capital sigma lowercases to final sigma at word end") {
  CHECK(Lower("ΟΔΟΣ ΣΟΦΟΣ.") == "οδος σοφος.");
  CHECK(Lower("Σ") == "σ");
  CHECK(Lower("ΑΣ\xCC\x81") == "ας\xCC\x81");  // a combining mark after sigma is skipped
  CHECK(Lower("ΣΑΣ") == "σας");
  CHECK(Upper("ς") == "Σ");
}
