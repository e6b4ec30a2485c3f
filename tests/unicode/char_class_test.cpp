// m3::unicode character classes: the Rust predicates the tokenizer relies on and the Python
// str predicates the template engine relies on, across scripts.
#include <doctest/doctest.h>

#include <initializer_list>

#include "gateway/unicode/char_class.h"

namespace u = m3::unicode;

TEST_CASE("Rust char predicates") {
  CHECK(u::IsWhitespace(U' '));
  CHECK(u::IsWhitespace(0x3000));
  CHECK(u::IsWhitespace(0x85));
  CHECK_FALSE(u::IsWhitespace(0x200B));  // zero width space is not White_Space
  CHECK_FALSE(u::IsWhitespace(0x1C));    // Rust does not count the ASCII separators
  CHECK(u::IsNumeric(U'7'));
  CHECK(u::IsNumeric(0x0663));  // Arabic-Indic three
  CHECK(u::IsNumeric(0x00BD));  // one half (No)
  CHECK(u::IsNumeric(0x2160));  // Roman numeral one (Nl)
  CHECK_FALSE(u::IsNumeric(U'x'));
  CHECK(u::IsWordChar(U'_'));
  CHECK(u::IsWordChar(0x4E2D));  // CJK
  CHECK(u::IsWordChar(0x0301));  // combining acute
  CHECK(u::IsWordChar(0x200D));
  CHECK_FALSE(u::IsWordChar(U'-'));
  CHECK(u::IsPunctuation(U'!'));
  CHECK(u::IsPunctuation(0x3002));  // ideographic full stop
  CHECK_FALSE(u::IsPunctuation(U'+'));
}

TEST_CASE("Python str predicates") {
  // str.isspace: Zs or bidi WS/B/S, so the ASCII information separators count.
  for (char32_t c : {U' ', U'\t', U'\n', char32_t{0x1C}, char32_t{0x1F}, char32_t{0x85},
                     char32_t{0xA0}, char32_t{0x2028}, char32_t{0x3000}}) {
    CAPTURE(static_cast<unsigned>(c));
    CHECK(u::IsPySpace(c));
  }
  CHECK_FALSE(u::IsPySpace(0x200B));
  CHECK_FALSE(u::IsPySpace(U'a'));
  // str.isalpha: letters of every script, not symbols or marks.
  for (char32_t c : {U'a', char32_t{0xDF}, char32_t{0x3A3}, char32_t{0x0532}, char32_t{0x10D0},
                     char32_t{0x13A0}, char32_t{0x4E2D}, char32_t{0x05D0}, char32_t{0x02B0}}) {
    CAPTURE(static_cast<unsigned>(c));
    CHECK(u::IsAlpha(c));
  }
  CHECK_FALSE(u::IsAlpha(0xD7));
  CHECK_FALSE(u::IsAlpha(0x0301));
  CHECK_FALSE(u::IsAlpha(U'1'));
  // str.isdigit / isdecimal.
  CHECK(u::IsDigit(U'9'));
  CHECK(u::IsDigit(0x0663));
  CHECK(u::IsDigit(0xB2));          // superscript two
  CHECK(u::IsDigit(0x2460));        // circled digit one
  CHECK_FALSE(u::IsDigit(0x2469));  // circled number ten is Numeric, not Digit
  CHECK_FALSE(u::IsDigit(0xBD));
  CHECK_FALSE(u::IsDecimal(0xB2));
  CHECK(u::IsDecimal(0xFF15));  // fullwidth five
}

TEST_CASE("cased, case-ignorable and letter case") {
  CHECK(u::IsCased(U'a'));
  CHECK(u::IsCased(0x13A0));  // Cherokee
  CHECK(u::IsCased(0x24B6));  // circled capital A (So, has a lower mapping)
  CHECK_FALSE(u::IsCased(0x05D0));
  CHECK(u::IsCaseIgnorable(0x0301));
  CHECK(u::IsCaseIgnorable(U'\''));
  CHECK(u::IsCaseIgnorable(U'.'));
  CHECK_FALSE(u::IsCaseIgnorable(U' '));
  CHECK(u::IsLowercase(0x3C2));
  CHECK(u::IsLowercase(0x24D0));  // circled small a
  CHECK(u::IsUppercase(0x0531));
  CHECK(u::IsUppercase(0x2160));  // Roman numeral one
  CHECK(u::IsTitlecase(0x01C5));
  CHECK_FALSE(u::IsUppercase(0x01C5));
  CHECK_FALSE(u::IsLowercase(0x01C5));
}
