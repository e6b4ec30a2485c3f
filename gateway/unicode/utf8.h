// UTF-8 encoding, decoding, validation and repair for the whole gateway. The hot decoders are
// inline because the tokenizer calls them per code point; the rest lives in utf8.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace m3::unicode {

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

inline bool IsContinuationByte(char b) {
  return (static_cast<unsigned char>(b) & 0xC0u) == 0x80u;
}

// Start of the code point that ends at byte offset `end` (exclusive) of valid UTF-8.
inline size_t PrevCodePointStart(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && IsContinuationByte(s[i])) --i;
  return i;
}

// End of the code point that starts at byte offset i: past the byte and any continuation
// bytes after it. Never reads past s and never stalls, so it is safe on invalid input.
inline size_t NextCodePointEnd(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && IsContinuationByte(s[i])) ++i;
  return i;
}

// Number of code points: bytes that are not continuation bytes (lenient on invalid input).
inline size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += IsContinuationByte(c) ? 0 : 1;
  return n;
}

bool IsAscii(std::string_view s);

void AppendUtf8(std::string& out, char32_t c);
std::string Encode(std::u32string_view text);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);
// Replaces each maximal invalid subsequence with U+FFFD (the Unicode "maximal subpart"
// practice, which both Rust's String::from_utf8_lossy and Python's
// bytes.decode('utf-8', 'replace') follow).
std::string RepairUtf8(std::string_view s);
// Decodes to code points with the same replacement rule as RepairUtf8.
std::u32string DecodeLossy(std::string_view s);

}  // namespace m3::unicode
