// Python str semantics over UTF-8 bytes: code-point length, whitespace, strip/split/splitlines,
// case mapping, and the exact repr() text of str and float. Jinja templates are evaluated with
// Python semantics, so every string operation of the engine goes through here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace m3::tmpl::py {

std::u32string Decode(std::string_view utf8);  // invalid bytes decode as U+FFFD
std::string Encode(std::u32string_view text);
void AppendUtf8(std::string& out, char32_t cp);
bool IsAscii(std::string_view s);
int64_t Length(std::string_view s);  // in code points

bool IsSpace(char32_t c);  // str.isspace()
bool IsAlpha(char32_t c);  // ASCII letters plus every non-ASCII letter-ish code point
bool IsDigit(char32_t c);

// str.strip/lstrip/rstrip; `chars` absent = whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit; `sep` absent = runs of whitespace. maxsplit < 0 = no limit.
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> SplitLines(std::string_view s, bool keepends);
std::string Replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);

std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Capitalize(std::string_view s);  // str.capitalize()
std::string Title(std::string_view s);       // str.title()
bool IsLowerCased(std::string_view s);       // str.islower()
bool IsUpperCased(std::string_view s);       // str.isupper()

std::string FloatRepr(double v);          // repr(float): shortest round trip, Python's layout
std::string StrRepr(std::string_view s);  // repr(str)

}  // namespace m3::tmpl::py
