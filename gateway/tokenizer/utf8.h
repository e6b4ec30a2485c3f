// UTF-8 helpers shared by the tokenizer pipeline: decoding/encoding code points, the lossy
// repair of invalid input (same replacement rule as Rust's String::from_utf8_lossy) and the
// Unicode character classes the Hugging Face components test (whitespace, numeric, word...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace m3::tok {

// Decodes the code point starting at s[i] (s must be valid UTF-8) and advances i past it.
inline char32_t NextCodePoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    char32_t c = ((b0 & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
    i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    char32_t c = ((b0 & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    i += 3;
    return c;
  }
  char32_t c = ((b0 & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
               ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
               (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
  i += 4;
  return c;
}

// Byte length of the UTF-8 sequence that starts with lead byte b (valid input only).
inline size_t Utf8Length(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// Start of the code point that ends at byte offset `end` (exclusive) of valid UTF-8.
inline size_t PrevCodePointStart(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0u) == 0x80u) --i;
  return i;
}

void AppendUtf8(std::string& out, char32_t c);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);
// Replaces each maximal invalid subsequence with U+FFFD, as Rust's from_utf8_lossy does.
std::string RepairUtf8(std::string_view s);

// Rust char predicates (Unicode-aware), answered from utf8proc's character database.
bool IsWhitespace(char32_t c);   // char::is_whitespace (White_Space property)
bool IsNumeric(char32_t c);      // char::is_numeric (general categories Nd, Nl, No)
bool IsWordChar(char32_t c);     // regex \w: alphabetic, marks, decimal digits, connectors
bool IsPunctuation(char32_t c);  // general categories P*

}  // namespace m3::tok
