// JsonTextReader: reads JSON text (RFC 8259) and reports what it finds to a handler, event by
// event (SAX style), for bounded_json's tree builder. It exists because nlohmann's lexer costs
// ~10 ns per byte (each byte pushed into two buffers) and, on an error, copies the whole last
// token into its message: a 64 MiB string with one bad byte at its end took 1.5 s to refuse.
// Here strings are scanned in runs, an error quotes at most a few bytes, a number literal is
// bounded in length (strtod on a 64 MiB literal is slow and no client needs one), the reader
// never recurses (depth costs a byte of stack per level) and it asks `cancelled` every MiB so
// a parse whose client has left can stop.
//
// It accepts what nlohmann::json::parse accepts (a UTF-8 byte order mark at the start is
// skipped; strings must be valid UTF-8; \u escapes must pair their surrogates) and reports
// numbers the same way: an integer that fits int64 (negative) or uint64 is an integer, every
// other number a double; a double that overflows is an error of kind kNumberOverflow. The
// differences: a number literal longer than kMaxNumberChars is refused (kNumberTooLong), and a
// raw NUL byte is a syntax error wherever it is (nlohmann's lexer takes it for the end of the
// input, so "0\0{{{" parsed as 0).
#pragma once

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace m3 {

enum class JsonReadFailure { kSyntax, kNumberOverflow, kNumberTooLong, kCancelled };

// A number literal longer than this is refused: a double needs at most 17 significant digits
// and an exponent of 3; the rest of the bound is room for clients that print many zeros.
inline constexpr size_t kMaxNumberChars = 1024;
// How often (in bytes of input) the reader asks whether to stop.
inline constexpr size_t kCancelCheckBytes = size_t{1} << 20;

// Handler: bool null(), boolean(bool), number_integer(int64_t), number_unsigned(uint64_t),
// number_float(double), string(std::string&), key(std::string&), start_object(), end_object(),
// start_array(), end_array() (false stops the read: the handler has its reason), and
// void read_error(JsonReadFailure, const std::string& message).
template <class Handler>
class JsonTextReader {
 public:
  JsonTextReader(std::string_view text, Handler& handler, const std::function<bool()>& cancelled)
      : p_(reinterpret_cast<const unsigned char*>(text.data())),
        end_(p_ + text.size()),
        begin_(p_),
        h_(handler),
        cancelled_(cancelled) {}

  // True when the text was one JSON value (with surrounding whitespace) and the handler took
  // every event.
  bool Read() {
    if (end_ - p_ >= 3 && p_[0] == 0xEF && p_[1] == 0xBB && p_[2] == 0xBF) p_ += 3;
    next_check_ = Offset() + kCancelCheckBytes;
    enum class Next { kValue, kKey, kAfterValue };
    Next next = Next::kValue;
    for (;;) {
      switch (next) {
        case Next::kValue: {
          SkipSpace();
          if (p_ == end_) return Syntax("unexpected end of input; expected a value");
          const unsigned char c = *p_;
          if (c == '{') {
            ++p_;
            if (!h_.start_object()) return false;
            SkipSpace();
            if (p_ != end_ && *p_ == '}') {
              ++p_;
              if (!h_.end_object()) return false;
              next = Next::kAfterValue;
            } else {
              stack_.push_back('{');
              next = Next::kKey;
            }
          } else if (c == '[') {
            ++p_;
            if (!h_.start_array()) return false;
            SkipSpace();
            if (p_ != end_ && *p_ == ']') {
              ++p_;
              if (!h_.end_array()) return false;
              next = Next::kAfterValue;
            } else {
              stack_.push_back('[');
              next = Next::kValue;
            }
          } else if (c == '"') {
            std::string s;
            if (!ReadString(s) || !h_.string(s)) return false;
            next = Next::kAfterValue;
          } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (!ReadNumber()) return false;
            next = Next::kAfterValue;
          } else if (c == 't' || c == 'f' || c == 'n') {
            if (!ReadLiteral()) return false;
            next = Next::kAfterValue;
          } else {
            return Syntax("unexpected " + Describe(c) + "; expected a value");
          }
          break;
        }
        case Next::kKey: {
          SkipSpace();
          if (p_ == end_) return Syntax("unexpected end of input; expected an object key");
          if (*p_ != '"') return Syntax("unexpected " + Describe(*p_) + "; expected an object key");
          std::string k;
          if (!ReadString(k)) return false;
          SkipSpace();
          if (p_ == end_ || *p_ != ':') {
            return Syntax(p_ == end_ ? "unexpected end of input; expected ':'"
                                     : "unexpected " + Describe(*p_) + "; expected ':'");
          }
          ++p_;
          if (!h_.key(k)) return false;
          next = Next::kValue;
          break;
        }
        case Next::kAfterValue: {
          if (Offset() >= next_check_) {
            next_check_ = Offset() + kCancelCheckBytes;
            if (cancelled_ && cancelled_()) {
              h_.read_error(JsonReadFailure::kCancelled, "the read was cancelled");
              return false;
            }
          }
          SkipSpace();
          if (stack_.empty()) {
            if (p_ != end_) return Syntax("unexpected " + Describe(*p_) + " after the value");
            return true;
          }
          const char open = stack_.back();
          if (p_ == end_) {
            return Syntax(open == '{' ? "unexpected end of input; expected ',' or '}'"
                                      : "unexpected end of input; expected ',' or ']'");
          }
          const unsigned char c = *p_;
          if (c == ',') {
            ++p_;
            next = open == '{' ? Next::kKey : Next::kValue;
          } else if (open == '{' && c == '}') {
            ++p_;
            stack_.pop_back();
            if (!h_.end_object()) return false;
          } else if (open == '[' && c == ']') {
            ++p_;
            stack_.pop_back();
            if (!h_.end_array()) return false;
          } else {
            return Syntax("unexpected " + Describe(c) +
                          (open == '{' ? "; expected ',' or '}'" : "; expected ',' or ']'"));
          }
          break;
        }
      }
    }
  }

 private:
  size_t Offset() const { return static_cast<size_t>(p_ - begin_); }

  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  static std::string Describe(unsigned char c) {
    static const char kHex[] = "0123456789abcdef";
    if (c == 0) return "NUL byte 0x00";
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }

  bool Syntax(const std::string& what) {
    h_.read_error(JsonReadFailure::kSyntax, what + " at byte " + std::to_string(Offset()));
    return false;
  }

  bool ReadLiteral() {
    const size_t left = static_cast<size_t>(end_ - p_);
    for (const std::string_view word : {"true", "false", "null"}) {
      if (*p_ != static_cast<unsigned char>(word[0])) continue;
      if (left < word.size() ||
          std::string_view(reinterpret_cast<const char*>(p_), word.size()) != word) {
        return Syntax("invalid literal; expected '" + std::string(word) + "'");
      }
      p_ += word.size();
      if (word == "null") return h_.null();
      return h_.boolean(word == "true");
    }
    return Syntax("invalid literal");
  }

  bool ReadNumber() {
    const unsigned char* start = p_;
    auto digits = [&] {
      const unsigned char* d = p_;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      return p_ != d;
    };
    if (*p_ == '-') ++p_;
    if (p_ == end_) return Syntax("invalid number; expected a digit after '-'");
    if (*p_ == '0') {
      ++p_;
    } else if (!digits()) {
      return Syntax("invalid number; expected a digit after '-'");
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      integer = false;
      if (!digits()) return Syntax("invalid number; expected a digit after '.'");
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      integer = false;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return Syntax("invalid number; expected a digit in the exponent");
    }
    const size_t length = static_cast<size_t>(p_ - start);
    const char* s = reinterpret_cast<const char*>(start);
    if (length > kMaxNumberChars) {
      h_.read_error(JsonReadFailure::kNumberTooLong,
                    "a number literal of " + std::to_string(length) +
                        " characters is longer than the limit of " +
                        std::to_string(kMaxNumberChars));
      return false;
    }
    if (integer) {
      if (*s == '-') {
        int64_t v = 0;
        const auto r = std::from_chars(s, s + length, v);
        if (r.ec == std::errc() && r.ptr == s + length) return h_.number_integer(v);
      } else {
        uint64_t v = 0;
        const auto r = std::from_chars(s, s + length, v);
        if (r.ec == std::errc() && r.ptr == s + length) return h_.number_unsigned(v);
      }
    }
    // strtod needs a terminated copy; the literal is short (bounded above).
    const std::string literal(s, length);
    errno = 0;
    const double v = std::strtod(literal.c_str(), nullptr);
    if (!std::isfinite(v)) {
      h_.read_error(JsonReadFailure::kNumberOverflow,
                    "number overflow parsing '" +
                        (length > 40 ? literal.substr(0, 40) + "..." : literal) + "'");
      return false;
    }
    return h_.number_float(v);
  }

  static int Hex(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Four hex digits after "\u" at p_; -1 when malformed.
  long ReadHex4() {
    if (end_ - p_ < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = Hex(p_[i]);
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    p_ += 4;
    return v;
  }

  static void AppendUtf8(std::string& out, long cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // The length of the well-formed UTF-8 sequence (RFC 3629) starting at p_ (its first byte is
  // >= 0x80), or 0.
  size_t Utf8Length() const {
    const size_t left = static_cast<size_t>(end_ - p_);
    const unsigned char c = p_[0];
    auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
      return i < left && p_[i] >= lo && p_[i] <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  // The string whose opening quote is at p_, unescaped into `out`.
  bool ReadString(std::string& out) {
    ++p_;
    for (;;) {
      const unsigned char* run = p_;
      while (p_ != end_ && *p_ >= 0x20 && *p_ < 0x80 && *p_ != '"' && *p_ != '\\') ++p_;
      out.append(reinterpret_cast<const char*>(run), static_cast<size_t>(p_ - run));
      if (p_ == end_) return Syntax("unexpected end of input inside a string");
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!ReadEscape(out)) return false;
        continue;
      }
      if (c < 0x20) return Syntax("control character " + Describe(c) + " inside a string");
      const size_t n = Utf8Length();
      if (n == 0) return Syntax("invalid UTF-8 " + Describe(c) + " inside a string");
      out.append(reinterpret_cast<const char*>(p_), n);
      p_ += n;
    }
  }

  bool ReadEscape(std::string& out) {
    ++p_;
    if (p_ == end_) return Syntax("unexpected end of input inside a string");
    const unsigned char e = *p_++;
    switch (e) {
      case '"':
        out += '"';
        return true;
      case '\\':
        out += '\\';
        return true;
      case '/':
        out += '/';
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u':
        break;
      default:
        --p_;
        return Syntax("invalid escape " + Describe(e) + " inside a string");
    }
    long cp = ReadHex4();
    if (cp < 0) return Syntax("'\\u' must be followed by 4 hex digits");
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return Syntax("a low surrogate \\u" + HexOf(cp) + " must follow a high surrogate");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
        return Syntax("the high surrogate \\u" + HexOf(cp) +
                      " must be followed by a low surrogate \\uDC00..\\uDFFF");
      }
      p_ += 2;
      const long low = ReadHex4();
      if (low < 0) return Syntax("'\\u' must be followed by 4 hex digits");
      if (low < 0xDC00 || low > 0xDFFF) {
        return Syntax("the high surrogate \\u" + HexOf(cp) +
                      " must be followed by a low surrogate \\uDC00..\\uDFFF");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(out, cp);
    return true;
  }

  static std::string HexOf(long v) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string s(4, '0');
    for (int i = 3; i >= 0; --i, v >>= 4) s[i] = kHex[v & 15];
    return s;
  }

  const unsigned char* p_;
  const unsigned char* const end_;
  const unsigned char* const begin_;
  Handler& h_;
  const std::function<bool()>& cancelled_;
  std::vector<char> stack_;  // '{' or '[' per open container
  size_t next_check_ = 0;
};

}  // namespace m3
