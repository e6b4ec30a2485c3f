// Python str semantics over UTF-8 (see py_text.h). Decoding, character classes and the
// Unicode case mappings come from gateway/unicode/ (utf8proc's tables).
#include "gateway/template/py_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gateway/template/render_budget.h"
#include "gateway/unicode/case_mapping.h"
#include "gateway/unicode/char_class.h"

namespace m3::tmpl::py {

using unicode::DecodeLossy;
using unicode::Encode;
using unicode::IsPySpace;

namespace {

bool InChars(char32_t c, const std::u32string& set) {
  return set.find(c) != std::u32string::npos;
}

}  // namespace

std::string Upper(std::string_view s) {
  return Encode(unicode::ToUpper(DecodeLossy(s)));
}

std::string Lower(std::string_view s) {
  return Encode(unicode::ToLower(DecodeLossy(s)));
}

// Python 3.8+: the first character is titlecased, the rest lowercased.
std::string Capitalize(std::string_view s) {
  const std::u32string u = DecodeLossy(s);
  std::u32string out;
  out.reserve(u.size());
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0) {
      unicode::AppendTitle(out, u[i]);
    } else {
      unicode::AppendLower(out, u, i);
    }
  }
  return Encode(out);
}

// A character following a cased one is lowercased, any other titlecased.
std::string Title(std::string_view s) {
  const std::u32string u = DecodeLossy(s);
  std::u32string out;
  out.reserve(u.size());
  bool prev_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    if (prev_cased) {
      unicode::AppendLower(out, u, i);
    } else {
      unicode::AppendTitle(out, u[i]);
    }
    prev_cased = unicode::IsCased(u[i]);
  }
  return Encode(out);
}

// str.islower: no uppercase or titlecase character and at least one lowercase one.
bool IsLowerCased(std::string_view s) {
  bool any = false;
  for (char32_t c : DecodeLossy(s)) {
    if (unicode::IsUppercase(c) || unicode::IsTitlecase(c)) return false;
    if (unicode::IsLowercase(c)) any = true;
  }
  return any;
}

// str.isupper: no lowercase or titlecase character and at least one uppercase one.
bool IsUpperCased(std::string_view s) {
  bool any = false;
  for (char32_t c : DecodeLossy(s)) {
    if (unicode::IsLowercase(c) || unicode::IsTitlecase(c)) return false;
    if (unicode::IsUppercase(c)) any = true;
  }
  return any;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string u = DecodeLossy(s);
  std::u32string set;
  if (chars) set = DecodeLossy(*chars);
  auto strip_it = [&](char32_t c) { return chars ? InChars(c, set) : IsPySpace(c); };
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
      CheckListSize(out.size());
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    CheckListSize(out.size());
    return out;
  }
  std::u32string u = DecodeLossy(s);
  size_t i = 0;
  while (i < u.size()) {
    while (i < u.size() && IsPySpace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = u.size();
      while (e > i && IsPySpace(u[e - 1])) --e;
      out.push_back(Encode(std::u32string_view(u).substr(i, e - i)));
      CheckListSize(out.size());
      break;
    }
    size_t j = i;
    while (j < u.size() && !IsPySpace(u[j])) ++j;
    out.push_back(Encode(std::u32string_view(u).substr(i, j - i)));
    CheckListSize(out.size());
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
      CheckListSize(out.size());
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    CheckListSize(out.size());
  } else {
    std::u32string u = DecodeLossy(s);
    size_t e = u.size();
    while (e > 0) {
      while (e > 0 && IsPySpace(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && IsPySpace(u[b])) ++b;
        out.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
        CheckListSize(out.size());
        break;
      }
      size_t b = e;
      while (b > 0 && !IsPySpace(u[b - 1])) --b;
      out.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
      CheckListSize(out.size());
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  std::u32string u = DecodeLossy(s);
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
    CheckListSize(out.size());
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
    std::u32string u = DecodeLossy(s);
    int64_t done = 0;
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out += with;
        CheckStringSize(out.size());
        ++done;
      }
      unicode::AppendUtf8(out, c);
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
    CheckStringSize(out.size());
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
  for (char32_t c : DecodeLossy(s)) {
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
      unicode::AppendUtf8(out, c);
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
