// name="..." attribute parsing (see name_attribute.h).
#include "gateway/text/name_attribute.h"

namespace m3::text {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

bool ParseNameAttribute(std::string_view s, std::string& name) {
  size_t i = 0;
  if (i >= s.size() || !IsSpace(s[i])) return false;
  while (i < s.size() && IsSpace(s[i])) ++i;
  if (s.substr(i, 4) != "name") return false;
  i += 4;
  while (i < s.size() && IsSpace(s[i])) ++i;
  if (i >= s.size() || s[i] != '=') return false;
  ++i;
  while (i < s.size() && IsSpace(s[i])) ++i;
  if (i >= s.size()) return false;
  size_t begin, end;
  if (s[i] == '"' || s[i] == '\'') {
    char q = s[i];
    begin = i + 1;
    end = s.find(q, begin);
    if (end == std::string_view::npos) return false;
    i = end + 1;
  } else {
    begin = i;
    while (i < s.size() && !IsSpace(s[i]) && s[i] != '>') ++i;
    end = i;
  }
  while (i < s.size() && IsSpace(s[i])) ++i;
  if (i + 1 != s.size() || s[i] != '>' || end == begin) return false;
  name.assign(s.substr(begin, end - begin));
  return true;
}

}  // namespace m3::text
