// The scanners walk the alternatives of their pattern in order at each position; the comments
// name the alternative each step stands for. Every position matches some alternative, so the
// matches tile the text.
#include "gateway/tokenizer/split_scanners.h"

#include <utf8proc.h>

#include <array>
#include <vector>

#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kNewline = 8 };

// Class bits per BMP code point, from utf8proc's categories; others are looked up directly.
class ClassTable {
 public:
  ClassTable() : bmp_(0x10000) {
    for (char32_t c = 0; c < 0x10000; ++c) bmp_[c] = Compute(c);
  }
  uint8_t Of(char32_t c) const { return c < 0x10000 ? bmp_[c] : Compute(c); }

 private:
  static uint8_t Compute(char32_t c) {
    uint8_t bits = 0;
    if (c >= 0xD800 && c <= 0xDFFF) return 0;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
      case UTF8PROC_CATEGORY_LU:
      case UTF8PROC_CATEGORY_LL:
      case UTF8PROC_CATEGORY_LT:
      case UTF8PROC_CATEGORY_LM:
      case UTF8PROC_CATEGORY_LO:
        bits |= kLetter;
        break;
      case UTF8PROC_CATEGORY_ND:
      case UTF8PROC_CATEGORY_NL:
      case UTF8PROC_CATEGORY_NO:
        bits |= kNumber;
        break;
      default:
        break;
    }
    if (unicode::IsWhitespace(c)) bits |= kSpace;
    if (c == '\r' || c == '\n') bits |= kNewline;
    return bits;
  }
  std::vector<uint8_t> bmp_;
};

const ClassTable& Classes() {
  static const ClassTable table;
  return table;
}

struct Cursor {
  std::string_view text;
  const ClassTable& classes;
  // Class bits of the code point at i and its byte length.
  uint8_t At(size_t i, size_t& len) const {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      len = 1;
      return classes.Of(b);
    }
    size_t j = i;
    const char32_t c = unicode::NextCodePoint(text, j);
    len = j - i;
    return classes.Of(c);
  }
  // End of the run of code points starting at i whose class satisfies pred.
  template <typename Pred>
  size_t Run(size_t i, Pred pred) const {
    size_t len = 0;
    while (i < text.size() && pred(At(i, len))) i += len;
    return i;
  }
  // End of a run of at most `max` code points satisfying pred.
  template <typename Pred>
  size_t RunMax(size_t i, Pred pred, int max) const {
    size_t len = 0;
    for (int k = 0; k < max && i < text.size() && pred(At(i, len)); ++k) i += len;
    return i;
  }
};

bool IsLetter(uint8_t c) {
  return (c & kLetter) != 0;
}
bool IsNumber(uint8_t c) {
  return (c & kNumber) != 0;
}
bool IsSpace(uint8_t c) {
  return (c & kSpace) != 0;
}
bool IsNewline(uint8_t c) {
  return (c & kNewline) != 0;
}
bool IsOther(uint8_t c) {
  return (c & (kLetter | kNumber | kSpace)) == 0;
}  // [^\s\p{L}\p{N}]

// Length of a contraction after the apostrophe at i ('s 't 're 've 'm 'll 'd), 0 if none.
// With `caseless`, letters match either case, and 's' also matches U+017F (long s), as
// Unicode case folding has it.
size_t Contraction(std::string_view t, size_t i, bool caseless) {
  auto letter = [&](size_t k, char lower) {
    if (k >= t.size()) return false;
    const char c = t[k];
    return c == lower || (caseless && c == lower - 'a' + 'A');
  };
  const size_t k = i + 1;
  if (letter(k, 's') || letter(k, 't') || letter(k, 'm') || letter(k, 'd')) return 2;
  if (caseless && k + 1 < t.size() && t[k] == '\xC5' && t[k + 1] == '\xBF') return 3;  // 'ſ
  if ((letter(k, 'r') || letter(k, 'v')) && letter(k + 1, 'e')) return 3;
  if (letter(k, 'l') && letter(k + 1, 'l')) return 3;
  return 0;
}

// The whitespace alternatives shared by both patterns, for the run [i, e) of whitespace:
// \s+(?!\S) backs off one character (code point) unless the run ends the text; then \s+.
size_t TrailingSpaceRule(std::string_view text, size_t i, size_t e) {
  if (e == text.size()) return e;
  const size_t last = unicode::PrevCodePointStart(text, e);
  return last > i ? last : e;
}

}  // namespace

SplitScanner::SplitScanner(Kind kind) : kind_(kind) {
  Classes();
}

const char* SplitScanner::Gpt2Pattern() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

const char* SplitScanner::Llama3Pattern() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

std::unique_ptr<SplitScanner> SplitScanner::ForPattern(const std::string& regex) {
  if (regex == Gpt2Pattern()) return std::make_unique<SplitScanner>(Kind::kGpt2);
  if (regex == Llama3Pattern()) return std::make_unique<SplitScanner>(Kind::kLlama3);
  return nullptr;
}

namespace {

size_t MatchLlama3(const Cursor& cur, size_t i) {
  const std::string_view text = cur.text;
  const size_t n = text.size();
  size_t len = 0;
  const uint8_t c = cur.At(i, len);
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (text[i] == '\'') {
    if (size_t k = Contraction(text, i, true)) return i + k;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (IsLetter(c)) return cur.Run(i, IsLetter);
  if (!IsNewline(c) && !IsNumber(c) && i + len < n) {
    size_t len2 = 0;
    if (IsLetter(cur.At(i + len, len2))) return cur.Run(i + len, IsLetter);
  }
  // \p{N}{1,3}
  if (IsNumber(c)) return cur.RunMax(i, IsNumber, 3);
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t start = i;
  if (text[i] == ' ' && i + 1 < n) {
    size_t len2 = 0;
    if (IsOther(cur.At(i + 1, len2))) start = i + 1;
  }
  if (start != i || IsOther(c)) {
    const size_t e = cur.Run(start, IsOther);
    return cur.Run(e, IsNewline);
  }
  // Only whitespace is left. \s*[\r\n]+ : the run up to its last newline, if it has one.
  const size_t e = cur.Run(i, IsSpace);
  size_t last_newline = n;
  for (size_t k = i; k < e;) {
    const uint8_t ck = cur.At(k, len);
    if (IsNewline(ck)) last_newline = k;
    k += len;
  }
  if (last_newline != n) return last_newline + 1;
  return TrailingSpaceRule(text, i, e);
}

size_t MatchGpt2(const Cursor& cur, size_t i) {
  const std::string_view text = cur.text;
  const size_t n = text.size();
  size_t len = 0;
  // 's|'t|'re|'ve|'m|'ll|'d
  if (text[i] == '\'') {
    if (size_t k = Contraction(text, i, false)) return i + k;
  }
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' (an optional space, then one class's run)
  size_t start = i;
  uint8_t c = cur.At(i, len);
  if (text[i] == ' ' && i + 1 < n) {
    size_t len2 = 0;
    const uint8_t next = cur.At(i + 1, len2);
    if (!IsSpace(next)) {
      start = i + 1;
      c = next;
    }
  }
  if (IsLetter(c)) return cur.Run(start, IsLetter);
  if (IsNumber(c)) return cur.Run(start, IsNumber);
  if (IsOther(c)) return cur.Run(start, IsOther);
  // \s+(?!\S) | \s+
  return TrailingSpaceRule(text, i, cur.Run(i, IsSpace));
}

}  // namespace

void SplitScanner::ForEachMatch(std::string_view text,
                                FunctionRef<void(size_t, size_t)> on_match) const {
  const Cursor cur{text, Classes()};
  size_t i = 0;
  while (i < text.size()) {
    const size_t e = kind_ == Kind::kLlama3 ? MatchLlama3(cur, i) : MatchGpt2(cur, i);
    on_match(i, e);
    i = e;
  }
}

}  // namespace m3::tok
