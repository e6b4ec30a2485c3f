// Python str semantics over UTF-8 (see py_text.h). Case mapping covers ASCII, Latin-1,
// Greek and Cyrillic, which is what chat templates meet in practice.
#include "gateway/template/py_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace m3::tmpl::py {

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char32_t cp = 0xFFFD;
    size_t n = 1;
    if (c < 0x80) {
      cp = c;
    } else if ((c >> 5) == 0x6) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      n = 4;
      cp = c & 0x07;
    } else {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    if (i + n > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    bool ok = true;
    for (size_t k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(out, c);
  return out;
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

int64_t Length(std::string_view s) {
  int64_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsDigit(char32_t c) {
  return c >= '0' && c <= '9';
}

bool IsAlpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return c >= 0xC0 && c != 0xD7 && c != 0xF7 && !IsSpace(c);
}

namespace {

char32_t ToUpper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t ToLower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

bool IsCased(char32_t c) {
  return ToUpper(c) != c || ToLower(c) != c;
}

template <typename F>
std::string MapChars(std::string_view s, F f) {
  if (IsAscii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(f(static_cast<char32_t>(c)));
    return out;
  }
  std::u32string u = Decode(s);
  for (char32_t& c : u) c = f(c);
  return Encode(u);
}

bool InChars(char32_t c, const std::u32string& set) {
  return set.find(c) != std::u32string::npos;
}

}  // namespace

std::string Upper(std::string_view s) {
  return MapChars(s, ToUpper);
}
std::string Lower(std::string_view s) {
  return MapChars(s, ToLower);
}

std::string Capitalize(std::string_view s) {
  std::u32string u = Decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? ToUpper(u[i]) : ToLower(u[i]);
  return Encode(u);
}

std::string Title(std::string_view s) {
  std::u32string u = Decode(s);
  bool prev_cased = false;
  for (char32_t& c : u) {
    bool cased = IsCased(c);
    c = prev_cased ? ToLower(c) : ToUpper(c);
    prev_cased = cased;
  }
  return Encode(u);
}

bool IsLowerCased(std::string_view s) {
  bool any = false;
  for (char32_t c : Decode(s)) {
    if (ToLower(c) != c) return false;
    if (ToUpper(c) != c) any = true;
  }
  return any;
}

bool IsUpperCased(std::string_view s) {
  bool any = false;
  for (char32_t c : Decode(s)) {
    if (ToUpper(c) != c) return false;
    if (ToLower(c) != c) any = true;
  }
  return any;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string u = Decode(s);
  std::u32string set;
  if (chars) set = Decode(*chars);
  auto strip_it = [&](char32_t c) { return chars ? InChars(c, set) : IsSpace(c); };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return Encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = Decode(s);
  size_t i = 0;
  while (i < u.size()) {
    while (i < u.size() && IsSpace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = u.size();
      while (e > i && IsSpace(u[e - 1])) --e;
      out.push_back(Encode(std::u32string_view(u).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < u.size() && !IsSpace(u[j])) ++j;
    out.push_back(Encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    std::u32string u = Decode(s);
    size_t e = u.size();
    while (e > 0) {
      while (e > 0 && IsSpace(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && IsSpace(u[b])) ++b;
        out.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !IsSpace(u[b - 1])) --b;
      out.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  std::u32string u = Decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < u.size()) {
    char32_t c = u[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (c == '\r' && eol < u.size() && u[eol] == '\n') ++eol;
    out.push_back(Encode(std::u32string_view(u).substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < u.size()) out.push_back(Encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string Replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    std::u32string u = Decode(s);
    int64_t done = 0;
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      AppendUtf8(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(with);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out += digits;
        out.append(exp + 1 - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, exp + 1);
        out += '.';
        out.append(digits, exp + 1);
      }
    } else {
      out += "0.";
      out.append(-exp - 1, '0');
      out += digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  return out;
}

namespace {

bool IsPrintable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  return true;
}

}  // namespace

std::string StrRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : Decode(s)) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (IsPrintable(c)) {
      AppendUtf8(out, c);
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out += quote;
  return out;
}

}  // namespace m3::tmpl::py
