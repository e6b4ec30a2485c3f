// Unicode full case mapping (what Python's str.upper/lower/title use): utf8proc's simple
// mappings, plus the unconditional one-to-many mappings of SpecialCasing.txt and the
// Final_Sigma rule for lowercasing capital sigma.
//
// utf8proc 2.8 exposes only simple (one-to-one) mappings (utf8proc_toupper/tolower/totitle),
// so the one-to-many mappings are listed in case_mapping.cpp for the characters that occur in
// ordinary text: U+00DF sharp s, U+0130 dotted capital I, U+0149, U+01F0, U+0390, U+03B0,
// U+0587 Armenian ech-yiwn, U+1E96..U+1E9A, the Latin ligatures U+FB00..U+FB06 and the
// Armenian ligatures U+FB13..U+FB17. Remaining difference from Python: the Greek characters
// with ypogegrammeni / prosgegrammeni or perispomeni (U+1F50..U+1FFC, e.g. 'ᾳ'.upper() is
// 'ΑΙ' in Python) keep their simple mapping here. Language-specific (Turkish, Lithuanian)
// rules are not applied, as Python does not apply them either.
#pragma once

#include <string>
#include <string_view>

namespace m3::unicode {

// Append the full mapping of one code point.
void AppendUpper(std::u32string& out, char32_t c);
void AppendTitle(std::u32string& out, char32_t c);
// Lowercase of text[i], with capital sigma becoming final sigma (U+03C2) when the Unicode
// Final_Sigma condition holds in `text`.
void AppendLower(std::u32string& out, std::u32string_view text, size_t i);

std::u32string ToUpper(std::u32string_view text);
std::u32string ToLower(std::u32string_view text);

}  // namespace m3::unicode
