// ParseRegex: a recursive-descent parser straight to GrammarIr (no intermediate tree). Errors
// name the offending offset.
#include "grammar/regex_parser.h"

namespace m3::grammar {

namespace {

class RegexParser {
 public:
  RegexParser(GrammarIr& ir, std::string_view re, const RegexOptions& o)
      : ir_(ir), re_(re), opt_(o) {}

  ExprId Parse() {
    Require(re_.size() <= ir_.limits().max_source_bytes, ErrorCode::kTooLarge,
            "regex longer than " + std::to_string(ir_.limits().max_source_bytes) + " bytes");
    if (Peek('^')) ++pos_;
    ExprId e = Alternation(0);
    if (pos_ != re_.size())
      throw Error(ErrorCode::kInvalidArgument,
                  Where() + (re_[pos_] == ')' ? "unbalanced ')'" : "unexpected character"));
    return e;
  }

 private:
  std::string Where() const { return "invalid regex at offset " + std::to_string(pos_) + ": "; }
  bool Peek(char c) const { return pos_ < re_.size() && re_[pos_] == c; }
  bool AtEnd() const { return pos_ >= re_.size(); }

  ExprId Alternation(int depth) {
    Require(depth <= ir_.limits().max_depth, ErrorCode::kTooLarge,
            "regex nested deeper than " + std::to_string(ir_.limits().max_depth) +
                " groups (CompileLimits::max_depth)");
    std::vector<ExprId> alts = {Sequence(depth)};
    while (Peek('|')) {
      ++pos_;
      alts.push_back(Sequence(depth));
    }
    return ir_.Choice(std::move(alts));
  }

  ExprId Sequence(int depth) {
    std::vector<ExprId> items;
    while (!AtEnd() && !Peek('|') && !Peek(')')) {
      if (Peek('$') && pos_ + 1 == re_.size()) {
        ++pos_;
        break;
      }
      Require(!Peek('^') && !Peek('$'), ErrorCode::kInvalidArgument,
              Where() + "anchors are supported only at the start and end");
      ExprId atom = Atom(depth);
      items.push_back(Quantified(atom));
    }
    return ir_.Seq(std::move(items));
  }

  int Number() {
    Require(!AtEnd() && isdigit(static_cast<unsigned char>(re_[pos_])), ErrorCode::kInvalidArgument,
            Where() + "expected a number in {}");
    long v = 0;
    while (!AtEnd() && isdigit(static_cast<unsigned char>(re_[pos_]))) {
      v = v * 10 + (re_[pos_++] - '0');
      Require(v <= ir_.limits().max_repeat, ErrorCode::kTooLarge,
              "regex repetition bound over " + std::to_string(ir_.limits().max_repeat) +
                  " (CompileLimits::max_repeat)");
    }
    return static_cast<int>(v);
  }

  ExprId Quantified(ExprId atom) {
    for (;;) {
      int min, max;
      if (Peek('*')) {
        min = 0, max = -1, ++pos_;
      } else if (Peek('+')) {
        min = 1, max = -1, ++pos_;
      } else if (Peek('?')) {
        min = 0, max = 1, ++pos_;
      } else if (Peek('{') && pos_ + 1 < re_.size() &&
                 isdigit(static_cast<unsigned char>(re_[pos_ + 1]))) {
        ++pos_;
        min = Number();
        max = min;
        if (Peek(',')) {
          ++pos_;
          max = Peek('}') ? -1 : Number();
        }
        Require(Peek('}'), ErrorCode::kInvalidArgument, Where() + "expected '}'");
        ++pos_;
        Require(max < 0 || max >= min, ErrorCode::kInvalidArgument,
                Where() + "repetition {m,n} with n < m");
      } else {
        return atom;
      }
      if (Peek('?') || Peek('+')) ++pos_;  // lazy / possessive: the same language
      atom = ir_.Repeat(atom, min, max);
    }
  }

  // A character to produce, escaped for a JSON string when asked.
  ExprId Chars(std::vector<CodepointRange> ranges, bool negate) {
    if (!opt_.json_string) return ir_.Codepoints(std::move(ranges), negate);
    auto set = negate ? Complement(std::move(ranges)) : Normalize(std::move(ranges));
    auto has = [&](uint32_t c) {
      for (auto [lo, hi] : set)
        if (c >= lo && c <= hi) return true;
      return false;
    };
    std::vector<ExprId> alts;
    std::vector<CodepointRange> plain;
    // The plain part: everything but the controls, '"' and '\\', which need escapes.
    for (auto [lo, hi] : set) {
      std::vector<CodepointRange> parts = {{lo, hi}};
      for (auto [xlo, xhi] : std::vector<CodepointRange>{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}) {
        std::vector<CodepointRange> next;
        for (auto [q, r] : parts) {
          if (r < xlo || q > xhi) {
            next.push_back({q, r});
            continue;
          }
          if (q < xlo) next.push_back({q, xlo - 1});
          if (r > xhi) next.push_back({xhi + 1, r});
        }
        parts = std::move(next);
      }
      plain.insert(plain.end(), parts.begin(), parts.end());
    }
    if (!plain.empty()) alts.push_back(ir_.Codepoints(plain));
    if (has('"')) alts.push_back(ir_.Literal("\\\""));
    if (has('\\')) alts.push_back(ir_.Literal("\\\\"));
    if (has('\n')) alts.push_back(ir_.Literal("\\n"));
    if (has('\t')) alts.push_back(ir_.Literal("\\t"));
    if (has('\r')) alts.push_back(ir_.Literal("\\r"));
    return ir_.Choice(std::move(alts));
  }

  uint32_t DecodeChar() {
    auto u = static_cast<unsigned char>(re_[pos_]);
    int n = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
    Require(n > 0 && pos_ + static_cast<size_t>(n) <= re_.size(), ErrorCode::kInvalidArgument,
            Where() + "invalid UTF-8");
    uint32_t c = n == 1 ? u : n == 2 ? (u & 0x1F) : n == 3 ? (u & 0x0F) : (u & 0x07);
    for (int k = 1; k < n; ++k)
      c = (c << 6) | (static_cast<unsigned char>(re_[pos_ + static_cast<size_t>(k)]) & 0x3F);
    pos_ += static_cast<size_t>(n);
    return c;
  }

  static void ClassEscape(char e, std::vector<CodepointRange>& out, bool& negated_class) {
    negated_class = false;
    switch (e) {
      case 'd':
      case 'D':
        out.push_back({'0', '9'});
        break;
      case 'w':
      case 'W':
        out.insert(out.end(), {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}});
        break;
      case 's':
      case 'S':
        out.insert(out.end(),
                   {{' ', ' '}, {'\t', '\r'}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}});
        break;
      default:
        return;
    }
    negated_class = isupper(static_cast<unsigned char>(e)) != 0;
  }

  // An escape after '\\' that stands for one code point.
  uint32_t EscapedChar() {
    Require(!AtEnd(), ErrorCode::kInvalidArgument, Where() + "trailing backslash");
    char e = re_[pos_++];
    auto hex = [&](int digits) {
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        Require(!AtEnd() && isxdigit(static_cast<unsigned char>(re_[pos_])),
                ErrorCode::kInvalidArgument, Where() + "bad hex escape");
        char h = re_[pos_++];
        v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(h))
                                               ? h - '0'
                                               : (tolower(h) - 'a' + 10));
      }
      return v;
    };
    switch (e) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case '0':
        return 0;
      case 'x':
        return hex(2);
      case 'u':
        if (Peek('{')) {
          ++pos_;
          uint32_t v = 0;
          while (!AtEnd() && !Peek('}')) v = v * 16 + hex(1);
          Require(Peek('}') && v <= 0x10FFFF, ErrorCode::kInvalidArgument,
                  Where() + "bad \\u{...} escape");
          ++pos_;
          return v;
        }
        return hex(4);
      default:
        Require(!isalnum(static_cast<unsigned char>(e)), ErrorCode::kInvalidArgument,
                Where() + "unsupported escape \\" + std::string(1, e) +
                    " (backreferences, word boundaries and lookaround are not supported)");
        return static_cast<unsigned char>(e);
    }
  }

  ExprId Class() {
    ++pos_;  // '['
    bool negate = Peek('^');
    if (negate) ++pos_;
    std::vector<CodepointRange> ranges;
    std::vector<ExprId> extra;  // negated shorthands inside a class: \D \W \S
    bool first = true;
    while (!AtEnd() && (!Peek(']') || first)) {
      first = false;
      uint32_t lo;
      if (Peek('\\')) {
        ++pos_;
        Require(!AtEnd(), ErrorCode::kInvalidArgument, Where() + "trailing backslash");
        std::vector<CodepointRange> cls;
        bool neg = false;
        ClassEscape(re_[pos_], cls, neg);
        if (!cls.empty()) {
          ++pos_;
          if (neg) {
            Require(!negate, ErrorCode::kInvalidArgument,
                    Where() + "a negated shorthand inside a negated class is not supported");
            auto c = Complement(cls);
            ranges.insert(ranges.end(), c.begin(), c.end());
          } else {
            ranges.insert(ranges.end(), cls.begin(), cls.end());
          }
          continue;
        }
        lo = Peek('b') ? (++pos_, uint32_t{8}) : EscapedChar();
      } else {
        lo = DecodeChar();
      }
      uint32_t hi = lo;
      if (Peek('-') && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
        ++pos_;
        if (Peek('\\')) {
          ++pos_;
          hi = EscapedChar();
        } else {
          hi = DecodeChar();
        }
        Require(hi >= lo, ErrorCode::kInvalidArgument, Where() + "class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    Require(Peek(']'), ErrorCode::kInvalidArgument, Where() + "unterminated character class");
    ++pos_;
    return Chars(std::move(ranges), negate);
  }

  ExprId Atom(int depth) {
    char c = re_[pos_];
    if (c == '(') {
      ++pos_;
      if (Peek('?')) {
        ++pos_;
        if (Peek(':')) {
          ++pos_;
        } else if (Peek('<') && pos_ + 1 < re_.size() && re_[pos_ + 1] != '=' &&
                   re_[pos_ + 1] != '!') {
          while (!AtEnd() && !Peek('>')) ++pos_;  // a named group: the name is ignored
          Require(Peek('>'), ErrorCode::kInvalidArgument, Where() + "unterminated group name");
          ++pos_;
        } else {
          throw Error(ErrorCode::kInvalidArgument,
                      Where() + "lookaround and inline flags are not supported");
        }
      }
      ExprId e = Alternation(depth + 1);
      Require(Peek(')'), ErrorCode::kInvalidArgument, Where() + "missing ')'");
      ++pos_;
      return e;
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      return Chars({{'\n', '\n'}, {'\r', '\r'}}, true);
    }
    Require(c != '*' && c != '+' && c != '?', ErrorCode::kInvalidArgument,
            Where() + "quantifier with nothing to repeat");
    if (c == '{' && pos_ + 1 < re_.size() && isdigit(static_cast<unsigned char>(re_[pos_ + 1])))
      throw Error(ErrorCode::kInvalidArgument, Where() + "quantifier with nothing to repeat");
    if (c == '\\') {
      ++pos_;
      Require(!AtEnd(), ErrorCode::kInvalidArgument, Where() + "trailing backslash");
      std::vector<CodepointRange> cls;
      bool neg = false;
      ClassEscape(re_[pos_], cls, neg);
      if (!cls.empty()) {
        ++pos_;
        return Chars(std::move(cls), neg);
      }
      uint32_t v = EscapedChar();
      return Chars({{v, v}}, false);
    }
    uint32_t v = DecodeChar();
    return Chars({{v, v}}, false);
  }

  GrammarIr& ir_;
  std::string_view re_;
  RegexOptions opt_;
  size_t pos_ = 0;
};

}  // namespace

ExprId ParseRegex(GrammarIr& ir, std::string_view regex, const RegexOptions& options) {
  return RegexParser(ir, regex, options).Parse();
}

}  // namespace m3::grammar
