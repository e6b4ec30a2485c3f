// Full case mapping (see case_mapping.h). The table below holds the facts of the unconditional
// one-to-many entries of Unicode's SpecialCasing.txt that utf8proc cannot answer.
#include "gateway/unicode/case_mapping.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

#include "gateway/unicode/char_class.h"

namespace m3::unicode {

namespace {

struct FullMapping {
  char32_t cp;
  const char32_t* lower;  // nullptr = the simple mapping
  const char32_t* title;
  const char32_t* upper;
};

// Sorted by code point.
constexpr FullMapping kFullMappings[] = {
    {0x00DF, nullptr, U"\u0053\u0073", U"\u0053\u0053"},
    {0x0130, U"\u0069\u0307", nullptr, nullptr},
    {0x0149, nullptr, U"\u02BC\u004E", U"\u02BC\u004E"},
    {0x01F0, nullptr, U"\u004A\u030C", U"\u004A\u030C"},
    {0x0390, nullptr, U"\u0399\u0308\u0301", U"\u0399\u0308\u0301"},
    {0x03B0, nullptr, U"\u03A5\u0308\u0301", U"\u03A5\u0308\u0301"},
    {0x0587, nullptr, U"\u0535\u0582", U"\u0535\u0552"},
    {0x1E96, nullptr, U"\u0048\u0331", U"\u0048\u0331"},
    {0x1E97, nullptr, U"\u0054\u0308", U"\u0054\u0308"},
    {0x1E98, nullptr, U"\u0057\u030A", U"\u0057\u030A"},
    {0x1E99, nullptr, U"\u0059\u030A", U"\u0059\u030A"},
    {0x1E9A, nullptr, U"\u0041\u02BE", U"\u0041\u02BE"},
    {0xFB00, nullptr, U"\u0046\u0066", U"\u0046\u0046"},
    {0xFB01, nullptr, U"\u0046\u0069", U"\u0046\u0049"},
    {0xFB02, nullptr, U"\u0046\u006C", U"\u0046\u004C"},
    {0xFB03, nullptr, U"\u0046\u0066\u0069", U"\u0046\u0046\u0049"},
    {0xFB04, nullptr, U"\u0046\u0066\u006C", U"\u0046\u0046\u004C"},
    {0xFB05, nullptr, U"\u0053\u0074", U"\u0053\u0054"},
    {0xFB06, nullptr, U"\u0053\u0074", U"\u0053\u0054"},
    {0xFB13, nullptr, U"\u0544\u0576", U"\u0544\u0546"},
    {0xFB14, nullptr, U"\u0544\u0565", U"\u0544\u0535"},
    {0xFB15, nullptr, U"\u0544\u056B", U"\u0544\u053B"},
    {0xFB16, nullptr, U"\u054E\u0576", U"\u054E\u0546"},
    {0xFB17, nullptr, U"\u0544\u056D", U"\u0544\u053D"},
};

const FullMapping* FindFull(char32_t c) {
  if (c < 0xDF) return nullptr;
  const auto* it = std::lower_bound(std::begin(kFullMappings), std::end(kFullMappings), c,
                                    [](const FullMapping& m, char32_t v) { return m.cp < v; });
  return it != std::end(kFullMappings) && it->cp == c ? it : nullptr;
}

char32_t Simple(utf8proc_int32_t (*map)(utf8proc_int32_t), char32_t c) {
  return static_cast<char32_t>(map(static_cast<utf8proc_int32_t>(c)));
}

// Unicode Final_Sigma: preceded by a cased letter and not followed by one, skipping
// case-ignorable characters in both directions.
bool IsFinalSigma(std::u32string_view text, size_t i) {
  size_t j = i;
  while (j > 0 && IsCaseIgnorable(text[j - 1])) --j;
  if (j == 0 || !IsCased(text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && IsCaseIgnorable(text[k])) ++k;
  return k == text.size() || !IsCased(text[k]);
}

// Upper- and titlecase agree on ASCII; elsewhere the full mapping wins over the simple one.
void AppendMapped(std::u32string& out, char32_t c, const char32_t* FullMapping::*full,
                  utf8proc_int32_t (*simple)(utf8proc_int32_t)) {
  if (c < 0x80) {
    out.push_back(c >= 'a' && c <= 'z' ? c - 32 : c);
    return;
  }
  if (const auto* m = FindFull(c); m != nullptr && m->*full != nullptr) {
    out += m->*full;
    return;
  }
  out.push_back(Simple(simple, c));
}

}  // namespace

void AppendUpper(std::u32string& out, char32_t c) {
  AppendMapped(out, c, &FullMapping::upper, utf8proc_toupper);
}

void AppendTitle(std::u32string& out, char32_t c) {
  AppendMapped(out, c, &FullMapping::title, utf8proc_totitle);
}

void AppendLower(std::u32string& out, std::u32string_view text, size_t i) {
  const char32_t c = text[i];
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x3A3) {
    out.push_back(IsFinalSigma(text, i) ? 0x3C2 : 0x3C3);
    return;
  }
  if (const auto* m = FindFull(c); m != nullptr && m->lower != nullptr) {
    out += m->lower;
    return;
  }
  out.push_back(Simple(utf8proc_tolower, c));
}

std::u32string ToUpper(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUpper(out, c);
  return out;
}

std::u32string ToLower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) AppendLower(out, text, i);
  return out;
}

}  // namespace m3::unicode
