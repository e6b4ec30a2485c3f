// Unicode character classes, answered from utf8proc's character database. Two families: the
// Rust char / regex predicates the Hugging Face tokenizer components test, and the Python str
// predicates (str.isspace, isalpha, isdigit...) the chat-template engine needs.
#pragma once

namespace m3::unicode {

// Rust semantics (tokenizer).
bool IsWhitespace(char32_t c);   // char::is_whitespace (White_Space property)
bool IsNumeric(char32_t c);      // char::is_numeric (general categories Nd, Nl, No)
bool IsWordChar(char32_t c);     // regex \w: alphabetic, marks, decimal digits, connectors
bool IsPunctuation(char32_t c);  // general categories P*

// Python semantics (templates).
bool IsPySpace(char32_t c);  // str.isspace: category Zs or bidi class WS, B, S
bool IsAlpha(char32_t c);    // str.isalpha: categories Lu, Ll, Lt, Lm, Lo
bool IsDecimal(char32_t c);  // str.isdecimal: category Nd
// str.isdigit: Nd, plus No characters whose compatibility decomposition is one decimal digit
// (superscripts, subscripts, circled 1-9). Python's Numeric_Type=Digit also holds a few No
// characters without such a decomposition (e.g. U+2474 PARENTHESIZED DIGIT ONE, U+2776
// DINGBAT NEGATIVE CIRCLED DIGIT ONE); utf8proc has no numeric-type data, so those answer false.
bool IsDigit(char32_t c);
// Unicode Cased: Lu, Ll, Lt or any character with a case mapping. Other_Lowercase letters
// without a mapping (U+00AA, U+00BA, modifier letters) are not seen as cased.
bool IsCased(char32_t c);
// Unicode Case_Ignorable: Mn, Me, Cf, Lm, Sk plus the Word_Break MidLetter / MidNumLet /
// Single_Quote characters.
bool IsCaseIgnorable(char32_t c);
bool IsLowercase(char32_t c);  // category Ll (or cased with only an upper mapping)
bool IsUppercase(char32_t c);  // category Lu (or cased with only a lower mapping)
bool IsTitlecase(char32_t c);  // category Lt

}  // namespace m3::unicode
