// Character classes from utf8proc's tables (see char_class.h); only ASCII fast paths and the
// few properties utf8proc does not carry are spelled out here.
#include "gateway/unicode/char_class.h"

#include <utf8proc.h>

#include <cstdint>
#include <initializer_list>

namespace m3::unicode {

namespace {

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Sets of general categories as bit masks, so each class below is one lookup.
constexpr uint32_t Bits(std::initializer_list<utf8proc_category_t> cats) {
  uint32_t m = 0;
  for (auto c : cats) m |= 1u << c;
  return m;
}

bool InCategories(char32_t c, uint32_t mask) {
  return (mask >> Category(c)) & 1u;
}

constexpr uint32_t kLetters =
    Bits({UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LM,
          UTF8PROC_CATEGORY_LO});
constexpr uint32_t kNumbers =
    Bits({UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NO});
constexpr uint32_t kWord =
    kLetters | Bits({UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_MC, UTF8PROC_CATEGORY_ME,
                     UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_PC});
constexpr uint32_t kPunctuation =
    Bits({UTF8PROC_CATEGORY_PC, UTF8PROC_CATEGORY_PD, UTF8PROC_CATEGORY_PS, UTF8PROC_CATEGORY_PE,
          UTF8PROC_CATEGORY_PI, UTF8PROC_CATEGORY_PF, UTF8PROC_CATEGORY_PO});
constexpr uint32_t kCaseIgnorable =
    Bits({UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_ME, UTF8PROC_CATEGORY_CF, UTF8PROC_CATEGORY_LM,
          UTF8PROC_CATEGORY_SK});
constexpr uint32_t kCasedLetters =
    Bits({UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT});

bool HasUpper(char32_t c) {
  return utf8proc_toupper(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c);
}
bool HasLower(char32_t c) {
  return utf8proc_tolower(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c);
}

}  // namespace

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return InCategories(c, kNumbers);
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  return InCategories(c, kWord);
}

bool IsPunctuation(char32_t c) {
  return InCategories(c, kPunctuation);
}

bool IsPySpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c > 0x10FFFF) return false;
  if (Category(c) == UTF8PROC_CATEGORY_ZS) return true;
  const auto bidi = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->bidi_class;
  return bidi == UTF8PROC_BIDI_CLASS_WS || bidi == UTF8PROC_BIDI_CLASS_B ||
         bidi == UTF8PROC_BIDI_CLASS_S;
}

bool IsAlpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return InCategories(c, kLetters);
}

bool IsDecimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return Category(c) == UTF8PROC_CATEGORY_ND;
}

bool IsDigit(char32_t c) {
  if (IsDecimal(c)) return true;
  if (c > 0x10FFFF || Category(c) != UTF8PROC_CATEGORY_NO) return false;
  utf8proc_int32_t buf[4];
  int last_boundclass = 0;
  const auto n = utf8proc_decompose_char(
      static_cast<utf8proc_int32_t>(c), buf, 4,
      static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), &last_boundclass);
  return n == 1 && IsDecimal(static_cast<char32_t>(buf[0]));
}

bool IsCased(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return InCategories(c, kCasedLetters) || HasUpper(c) || HasLower(c);
}

bool IsCaseIgnorable(char32_t c) {
  switch (c) {
    case 0x27:  // Word_Break Single_Quote / MidNumLet / MidLetter
    case 0x2E:
    case 0x3A:
    case 0xB7:
    case 0x387:
    case 0x55F:
    case 0x5F4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A:
      return true;
    default:
      break;
  }
  if (c < 0x80) return c == '^' || c == '`';  // Sk
  return InCategories(c, kCaseIgnorable);
}

bool IsLowercase(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  const auto cat = Category(c);
  if (cat == UTF8PROC_CATEGORY_LL) return true;
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) return false;
  return HasUpper(c) && !HasLower(c);  // e.g. circled small letters (So), U+0345 (Mn)
}

bool IsUppercase(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  const auto cat = Category(c);
  if (cat == UTF8PROC_CATEGORY_LU) return true;
  if (cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return false;
  return HasLower(c) && !HasUpper(c);  // e.g. circled capital letters, Roman numerals
}

bool IsTitlecase(char32_t c) {
  return c >= 0x80 && Category(c) == UTF8PROC_CATEGORY_LT;
}

}  // namespace m3::unicode
