// Python str semantics over UTF-8 bytes: code-point length, strip/split/splitlines, case
// mapping (full Unicode mappings from gateway/unicode/), and the exact repr() text of str and
// float. Jinja templates are evaluated with Python semantics, so every string operation of the
// engine goes through here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/unicode/utf8.h"

namespace m3::tmpl::py {

// Python len(str): code points (decoding and character classes live in gateway/unicode/).
inline int64_t Length(std::string_view s) {
  return static_cast<int64_t>(unicode::CountCodePoints(s));
}

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
