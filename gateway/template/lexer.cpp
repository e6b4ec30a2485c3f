// Jinja2 lexer (see lexer.h). The strip rules follow jinja2.lexer.Lexer.tokeniter: a "-" sign
// strips all whitespace next to the tag, otherwise lstrip_blocks removes the indentation before
// a block or comment tag that starts its line, and trim_blocks eats one newline after %} / #}.
#include "gateway/template/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "gateway/template/py_text.h"
#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"
#include "shared/error.h"

namespace m3::tmpl {

void ThrowSyntaxError(const std::string& name, int line, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, name + ":" + std::to_string(line) + ": " + message);
}

namespace {

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsDigitC(char c) {
  return c >= '0' && c <= '9';
}
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) {
  return IsNameStart(c) || IsDigitC(c);
}

bool AllPySpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : unicode::DecodeLossy(s)) {
    if (!unicode::IsPySpace(c)) return false;
  }
  return true;
}

std::string RStripAll(std::string_view s) {
  return py::Strip(s, std::nullopt, /*left=*/false, /*right=*/true);
}

// Decodes a Python string literal body the way jinja does (unicode_escape).
std::string DecodeStringLiteral(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        if (i + n < body.size() + 0 && i + n <= body.size() - 0) {
          std::string hex(body.substr(i + 1, n));
          char* end = nullptr;
          unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (hex.size() == n && end == hex.c_str() + n) {
            unicode::AppendUtf8(out, static_cast<char32_t>(cp));
            i += n;
            break;
          }
        }
        out.push_back('\\');
        out.push_back(e);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          unsigned cp = 0;
          size_t k = 0;
          while (k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7') {
            cp = cp * 8 + static_cast<unsigned>(body[i + k] - '0');
            ++k;
          }
          i += k - 1;
          unicode::AppendUtf8(out, cp);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : name_(name) {
    // Normalize newlines and drop one trailing newline (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') newlines_.push_back(i);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t t = FindTagStart(pos);
      if (t == std::string::npos) {
        Emit(TokenType::kData, src_.substr(pos), pos);
        break;
      }
      char kind = src_[t + 1];  // '{' variable, '%' block, '#' comment
      char sign = t + 2 < n && (src_[t + 2] == '-' || src_[t + 2] == '+') ? src_[t + 2] : 0;
      size_t raw_end = kind == '%' ? MatchRawBegin(t) : std::string::npos;
      std::string text = src_.substr(pos, t - pos);
      text = ApplyLeftStrip(text, sign, kind != '{', line_starting);
      if (!text.empty()) Emit(TokenType::kData, text, pos);
      if (raw_end != std::string::npos) {
        pos = LexRaw(raw_end, src_[raw_end - 1] == '\n', &line_starting);
        continue;
      }
      size_t body = t + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = LexComment(t, body, &line_starting);
      } else {
        pos = LexTag(t, body, kind == '%', &line_starting);
      }
    }
    tokens_.push_back(Token{TokenType::kEof, "", LineAt(n)});
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t pos) const {
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) -
                                newlines_.begin());
  }

  void Emit(TokenType type, std::string text, size_t pos) {
    tokens_.push_back(Token{type, std::move(text), LineAt(pos)});
  }

  size_t FindTagStart(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  std::string ApplyLeftStrip(const std::string& text, char sign, bool lstrip_kind,
                             bool line_starting) const {
    if (sign == '-') return RStripAll(text);
    if (sign == '+' || !lstrip_kind) return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && AllPySpace(std::string_view(text).substr(l_pos))) {
      return text.substr(0, l_pos);
    }
    return text;
  }

  size_t SkipWs(size_t p) const {
    while (p < src_.size() && IsWs(src_[p])) ++p;
    return p;
  }

  // `{%[-+]?\s*raw\s*(-%}\s*|%})` at t: returns the position after it, or npos.
  size_t MatchRawBegin(size_t t) const {
    size_t p = t + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipWs(p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = SkipWs(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return SkipWs(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  // Block end at p (trim_blocks on); returns the position after it or npos.
  size_t MatchBlockEnd(size_t p) const {
    if (src_.compare(p, 3, "-%}") == 0) return SkipWs(p + 3);
    if (src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
      if (p < src_.size() && src_[p] == '\n') ++p;
      return p;
    }
    return std::string::npos;
  }

  size_t LexRaw(size_t p, bool line_starting_in, bool* line_starting) {
    for (size_t i = p; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t q = i + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign) ++q;
      q = SkipWs(q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      size_t end = MatchBlockEnd(SkipWs(q + 6));
      if (end == std::string::npos) continue;
      std::string text = ApplyLeftStrip(src_.substr(p, i - p), sign, true, line_starting_in);
      if (!text.empty()) Emit(TokenType::kData, text, p);
      *line_starting = src_[end - 1] == '\n';
      return end;
    }
    ThrowSyntaxError(name_, LineAt(p), "Missing end of raw directive");
  }

  size_t LexComment(size_t start, size_t body, bool* line_starting) {
    size_t q = src_.find("#}", body);
    if (q == std::string::npos)
      ThrowSyntaxError(name_, LineAt(start), "Missing end of comment tag");
    size_t end;
    if (q > body && src_[q - 1] == '-') {
      end = SkipWs(q + 2);
    } else if (q > body && src_[q - 1] == '+') {
      end = q + 2;
    } else {
      end = q + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;
    }
    *line_starting = src_[end - 1] == '\n';
    return end;
  }

  size_t LexTag(size_t start, size_t p, bool block, bool* line_starting) {
    Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", start);
    std::vector<char> balance;
    const size_t n = src_.size();
    while (true) {
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (block) {
          end = MatchBlockEnd(p);
        } else if (src_.compare(p, 3, "-}}") == 0) {
          end = SkipWs(p + 3);
        } else if (src_.compare(p, 2, "}}") == 0) {
          end = p + 2;
        }
        if (end != std::string::npos) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", p);
          *line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      if (p >= n) {
        ThrowSyntaxError(name_, LineAt(start),
                         block ? "unexpected end of template, expected '%}'"
                               : "unexpected end of template, expected '}}'");
      }
      char c = src_[p];
      if (IsWs(c)) {
        ++p;
        continue;
      }
      if (IsDigitC(c)) {
        p = LexNumber(p);
        continue;
      }
      if (IsNameStart(c)) {
        size_t e = p;
        while (e < n && IsNameChar(src_[e])) ++e;
        Emit(TokenType::kName, src_.substr(p, e - p), p);
        p = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < n && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= n) ThrowSyntaxError(name_, LineAt(p), "unexpected end of string literal");
        Emit(TokenType::kString,
             DecodeStringLiteral(std::string_view(src_).substr(p + 1, e - p - 1)), p);
        p = e + 1;
        continue;
      }
      static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* two : kTwo) {
        if (src_.compare(p, 2, two) == 0) op = two;
      }
      if (op.empty()) {
        if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
          ThrowSyntaxError(name_, LineAt(p), std::string("unexpected char '") + c + "'");
        }
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op[0]);
      } else if (op == ")" || op == "]" || op == "}") {
        char want = op == ")" ? '(' : (op == "]" ? '[' : '{');
        if (balance.empty() || balance.back() != want) {
          ThrowSyntaxError(name_, LineAt(p), "unexpected '" + op + "'");
        }
        balance.pop_back();
      }
      Emit(TokenType::kOp, op, p);
      p += op.size();
    }
  }

  size_t LexNumber(size_t p) {
    const size_t n = src_.size();
    auto digits = [&](size_t q) {
      while (q < n && (IsDigitC(src_[q]) || (src_[q] == '_' && q + 1 < n && IsDigitC(src_[q + 1]))))
        ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    bool after_dot = p > 0 && src_[p - 1] == '.';
    if (!after_dot && e + 1 < n && src_[e] == '.' && IsDigitC(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && IsDigitC(src_[q])) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token tok{is_float ? TokenType::kFloat : TokenType::kInt, text, LineAt(p)};
    if (is_float) {
      tok.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      tok.int_value = std::strtoll(text.c_str(), nullptr, 10);
    }
    tokens_.push_back(std::move(tok));
    return e;
  }

  const std::string& name_;
  std::string src_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source, const std::string& name) {
  return Lexer(source, name).Run();
}

}  // namespace m3::tmpl
