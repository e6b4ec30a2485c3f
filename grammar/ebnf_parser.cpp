// ParseEbnf: recursive descent with line/column in every error.
#include "grammar/ebnf_parser.h"

#include <cctype>

namespace m3::grammar {

namespace {

class EbnfParser {
 public:
  EbnfParser(GrammarIr& ir, std::string_view text) : ir_(ir), s_(text) {}

  void Parse(std::string_view root_rule) {
    Require(s_.size() <= ir_.limits().max_source_bytes, ErrorCode::kTooLarge,
            "grammar longer than " + std::to_string(ir_.limits().max_source_bytes) + " bytes");
    Skip();
    Require(!AtEnd(), ErrorCode::kInvalidArgument, "grammar is empty");
    while (!AtEnd()) {
      std::string name = Name();
      Require(!name.empty(), ErrorCode::kInvalidArgument, Where() + "expected a rule name");
      Skip();
      Require(s_.substr(pos_, 3) == "::=", ErrorCode::kInvalidArgument,
              Where() + "expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      RuleId r = RuleFor(name);
      Require(!defined_[static_cast<size_t>(r)], ErrorCode::kInvalidArgument,
              Where() + "rule '" + name + "' defined twice");
      defined_[static_cast<size_t>(r)] = 1;
      ir_.SetBody(r, Alternatives(0));
      Skip();
    }
    for (size_t r = 0; r < defined_.size(); ++r)
      Require(defined_[r] != 0, ErrorCode::kInvalidArgument,
              "grammar references undefined rule '" + ir_.rules()[r].name + "'");
    ir_.root = ir_.FindRule(root_rule);
    Require(ir_.root >= 0, ErrorCode::kInvalidArgument,
            "grammar has no root rule '" + std::string(root_rule) + "'");
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  std::string Where() const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "invalid grammar at line " + std::to_string(line) + " column " + std::to_string(col) +
           ": ";
  }
  static bool NameChar(char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }
  void Skip() {
    while (!AtEnd()) {
      if (isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (Peek('#')) {
        while (!AtEnd() && !Peek('\n')) ++pos_;
      } else {
        break;
      }
    }
  }
  std::string Name() {
    size_t start = pos_;
    while (!AtEnd() && NameChar(s_[pos_]) && !(s_[pos_] == '.' && pos_ == start)) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  // At `name ::=`: the start of the next rule.
  bool AtRuleStart() {
    size_t save = pos_;
    std::string n = Name();
    Skip();
    bool yes = !n.empty() && s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return yes;
  }
  RuleId RuleFor(const std::string& name) {
    RuleId r = ir_.FindRule(name);
    if (r < 0) {
      r = ir_.AddRule(name);
      defined_.push_back(0);
    }
    return r;
  }

  ExprId Alternatives(int depth) {
    Require(depth <= ir_.limits().max_depth, ErrorCode::kTooLarge,
            Where() + "groups nested deeper than " + std::to_string(ir_.limits().max_depth) +
                " (CompileLimits::max_depth)");
    std::vector<ExprId> alts = {Sequence(depth)};
    Skip();
    while (Peek('|')) {
      ++pos_;
      alts.push_back(Sequence(depth));
      Skip();
    }
    return ir_.Choice(std::move(alts));
  }

  ExprId Sequence(int depth) {
    std::vector<ExprId> items;
    for (;;) {
      Skip();
      if (AtEnd() || Peek('|') || Peek(')') || AtRuleStart()) break;
      items.push_back(Postfix(Primary(depth)));
    }
    return ir_.Seq(std::move(items));
  }

  int Number() {
    Skip();
    Require(!AtEnd() && isdigit(static_cast<unsigned char>(s_[pos_])), ErrorCode::kInvalidArgument,
            Where() + "expected a number");
    long v = 0;
    while (!AtEnd() && isdigit(static_cast<unsigned char>(s_[pos_]))) {
      v = v * 10 + (s_[pos_++] - '0');
      Require(v <= ir_.limits().max_repeat, ErrorCode::kTooLarge,
              Where() + "repetition bound over " + std::to_string(ir_.limits().max_repeat) +
                  " (CompileLimits::max_repeat)");
    }
    Skip();
    return static_cast<int>(v);
  }

  ExprId Postfix(ExprId e) {
    for (;;) {
      if (Peek('*')) {
        ++pos_;
        e = ir_.Star(e);
      } else if (Peek('+')) {
        ++pos_;
        e = ir_.Repeat(e, 1, -1);
      } else if (Peek('?')) {
        ++pos_;
        e = ir_.Optional(e);
      } else if (Peek('{')) {
        ++pos_;
        int min = Number(), max = min;
        if (Peek(',')) {
          ++pos_;
          Skip();
          max = Peek('}') ? -1 : Number();
        }
        Require(Peek('}'), ErrorCode::kInvalidArgument, Where() + "expected '}'");
        ++pos_;
        Require(max < 0 || max >= min, ErrorCode::kInvalidArgument,
                Where() + "repetition {m,n} with n < m");
        e = ir_.Repeat(e, min, max);
      } else {
        return e;
      }
    }
  }

  uint32_t Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      Require(!AtEnd() && isxdigit(static_cast<unsigned char>(s_[pos_])),
              ErrorCode::kInvalidArgument, Where() + "bad hex escape");
      char h = s_[pos_++];
      v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(h))
                                             ? h - '0'
                                             : tolower(static_cast<unsigned char>(h)) - 'a' + 10);
    }
    return v;
  }

  uint32_t Char() {
    Require(!AtEnd(), ErrorCode::kInvalidArgument, Where() + "unterminated literal");
    if (Peek('\\')) {
      ++pos_;
      Require(!AtEnd(), ErrorCode::kInvalidArgument, Where() + "trailing backslash");
      char e = s_[pos_++];
      switch (e) {
        case 'n':
          return '\n';
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case '0':
          return 0;
        case 'x':
          return Hex(2);
        case 'u':
          return Hex(4);
        case 'U':
          return Hex(8);
        case '\\':
        case '"':
        case '\'':
        case ']':
        case '[':
        case '-':
        case '^':
          return static_cast<unsigned char>(e);
        default:
          throw Error(ErrorCode::kInvalidArgument,
                      Where() + "unknown escape \\" + std::string(1, e));
      }
    }
    auto u = static_cast<unsigned char>(s_[pos_]);
    int n = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
    Require(n > 0 && pos_ + static_cast<size_t>(n) <= s_.size(), ErrorCode::kInvalidArgument,
            Where() + "invalid UTF-8");
    uint32_t c = n == 1 ? u : n == 2 ? (u & 0x1F) : n == 3 ? (u & 0x0F) : (u & 0x07);
    for (int k = 1; k < n; ++k)
      c = (c << 6) | (static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(k)]) & 0x3F);
    pos_ += static_cast<size_t>(n);
    return c;
  }

  ExprId Primary(int depth) {
    char c = s_[pos_];
    if (c == '"' || c == '\'') {
      ++pos_;
      std::string bytes;
      while (!AtEnd() && !Peek(c)) {
        Require(!Peek('\n'), ErrorCode::kInvalidArgument, Where() + "newline in a literal");
        AppendUtf8(Char(), bytes);
      }
      Require(Peek(c), ErrorCode::kInvalidArgument, Where() + "unterminated literal");
      ++pos_;
      return ir_.Literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negate = Peek('^');
      if (negate) ++pos_;
      std::vector<CodepointRange> ranges;
      while (!AtEnd() && !Peek(']')) {
        uint32_t lo = Char(), hi = lo;
        if (Peek('-') && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
          ++pos_;
          hi = Char();
          Require(hi >= lo, ErrorCode::kInvalidArgument, Where() + "class range out of order");
        }
        ranges.push_back({lo, hi});
      }
      Require(Peek(']'), ErrorCode::kInvalidArgument, Where() + "unterminated character class");
      ++pos_;
      return ir_.Codepoints(std::move(ranges), negate);
    }
    if (c == '(') {
      ++pos_;
      ExprId e = Alternatives(depth + 1);
      Skip();
      Require(Peek(')'), ErrorCode::kInvalidArgument, Where() + "missing ')'");
      ++pos_;
      return e;
    }
    if (c == '.') {
      ++pos_;
      return ir_.Codepoints({}, true);
    }
    std::string name = Name();
    Require(!name.empty(), ErrorCode::kInvalidArgument,
            Where() + "unexpected character '" + std::string(1, c) + "'");
    return ir_.Ref(RuleFor(name));
  }

  GrammarIr& ir_;
  std::string_view s_;
  size_t pos_ = 0;
  std::vector<uint8_t> defined_;
};

}  // namespace

void ParseEbnf(GrammarIr& ir, std::string_view text, std::string_view root_rule) {
  EbnfParser(ir, text).Parse(root_rule);
}

}  // namespace m3::grammar
