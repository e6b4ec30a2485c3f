// GrammarIr: expression construction with limits, and the lowering of code point ranges to
// UTF-8 byte-sequence alternatives (each range split where the encoded length or a leading
// byte's continuation bounds change).
#include "grammar/grammar_ir.h"

#include <algorithm>

namespace m3::grammar {

ExprId GrammarIr::Add(Expr e) {
  Require(exprs_.size() < limits_.max_states * 4, ErrorCode::kTooLarge,
          "grammar too large: more than " + std::to_string(limits_.max_states * 4) +
              " expressions (CompileLimits::max_states)");
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

ExprId GrammarIr::Empty() {
  return Add(Expr{});
}

ExprId GrammarIr::Literal(std::string_view bytes) {
  if (bytes.empty()) return Empty();
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = std::string(bytes);
  return Add(std::move(e));
}

ExprId GrammarIr::Bytes(const ByteSet& set) {
  Expr e;
  e.kind = ExprKind::kByteSet;
  e.set = set;
  return Add(std::move(e));
}

ExprId GrammarIr::Ref(RuleId rule) {
  Expr e;
  e.kind = ExprKind::kRuleRef;
  e.rule = rule;
  return Add(std::move(e));
}

ExprId GrammarIr::Seq(std::vector<ExprId> items) {
  if (items.size() == 1) return items[0];
  if (items.empty()) return Empty();
  Expr e;
  e.kind = ExprKind::kSeq;
  e.children = std::move(items);
  return Add(std::move(e));
}

ExprId GrammarIr::Choice(std::vector<ExprId> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kChoice;  // an empty choice matches nothing
  e.children = std::move(items);
  return Add(std::move(e));
}

ExprId GrammarIr::Repeat(ExprId item, int min, int max) {
  Require(min >= 0 && (max < 0 || max >= min), ErrorCode::kInvalidArgument,
          "invalid repetition bounds {" + std::to_string(min) + "," + std::to_string(max) + "}");
  Require(min <= limits_.max_repeat && max <= limits_.max_repeat, ErrorCode::kTooLarge,
          "repetition bound over the limit of " + std::to_string(limits_.max_repeat) +
              " (CompileLimits::max_repeat)");
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.children = {item};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

RuleId GrammarIr::AddRule(std::string name) {
  Require(rules_.size() < limits_.max_rules, ErrorCode::kTooLarge,
          "grammar too large: more than " + std::to_string(limits_.max_rules) +
              " rules (CompileLimits::max_rules)");
  rules_.push_back(Rule{std::move(name), -1});
  return static_cast<RuleId>(rules_.size() - 1);
}

RuleId GrammarIr::FindRule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<RuleId>(i);
  return -1;
}

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::vector<CodepointRange> Normalize(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodepointRange> out;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

std::vector<CodepointRange> Complement(std::vector<CodepointRange> ranges) {
  ranges = Normalize(std::move(ranges));
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (auto [lo, hi] : ranges) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

namespace {

// Removes the surrogates, which UTF-8 never encodes.
std::vector<CodepointRange> WithoutSurrogates(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  for (auto [lo, hi] : ranges) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) continue;
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  return out;
}

int Utf8Length(uint32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

}  // namespace

ExprId GrammarIr::Codepoints(std::vector<CodepointRange> ranges, bool negate) {
  ranges = negate ? Complement(std::move(ranges)) : Normalize(std::move(ranges));
  ranges = WithoutSurrogates(ranges);
  // Split every range so each piece has one encoded length and, for all but the last byte,
  // whole continuation spans: then a piece is a sequence of byte ranges.
  std::vector<ExprId> alternatives;
  ByteSet ascii;
  struct Piece {
    uint32_t lo, hi;
  };
  std::vector<Piece> work;
  for (auto [lo, hi] : ranges) {
    for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu}) {
      if (lo <= bound && hi > bound) {
        work.push_back({lo, bound});
        lo = bound + 1;
      }
    }
    work.push_back({lo, hi});
  }
  // Recursive splitting on continuation boundaries.
  std::vector<Piece> stack(work.rbegin(), work.rend());
  while (!stack.empty()) {
    Piece p = stack.back();
    stack.pop_back();
    int n = Utf8Length(p.lo);
    if (n == 1) {
      for (uint32_t c = p.lo; c <= p.hi; ++c) ascii.set(c);
      continue;
    }
    bool split = false;
    for (int i = 1; i < n; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;  // the low 6*i bits
      if ((p.lo & ~m) != (p.hi & ~m)) {
        if ((p.lo & m) != 0) {
          stack.push_back({(p.lo | m) + 1, p.hi});
          stack.push_back({p.lo, p.lo | m});
          split = true;
          break;
        }
        if ((p.hi & m) != m) {
          stack.push_back({p.hi & ~m, p.hi});
          stack.push_back({p.lo, (p.hi & ~m) - 1});
          split = true;
          break;
        }
      }
    }
    if (split) continue;
    std::string a, b;
    AppendUtf8(p.lo, a);
    AppendUtf8(p.hi, b);
    std::vector<ExprId> seq;
    for (size_t i = 0; i < a.size(); ++i) {
      ByteSet s;
      for (unsigned x = static_cast<uint8_t>(a[i]); x <= static_cast<uint8_t>(b[i]); ++x) s.set(x);
      seq.push_back(Bytes(s));
    }
    alternatives.push_back(Seq(std::move(seq)));
  }
  if (ascii.any()) alternatives.insert(alternatives.begin(), Bytes(ascii));
  return Choice(std::move(alternatives));
}

namespace {

std::string SetText(const ByteSet& s) {
  if (s.count() == 1) {
    for (int i = 0; i < 256; ++i)
      if (s.test(i)) {
        char buf[8];
        if (i >= 0x20 && i < 0x7F && i != '"' && i != '\\')
          return std::string("\"") + char(i) + "\"";
        snprintf(buf, sizeof buf, "\\x%02X", i);
        return std::string("\"") + buf + "\"";
      }
  }
  std::string out = "[";
  for (int i = 0; i < 256;) {
    if (!s.test(i)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 256 && s.test(j + 1)) ++j;
    auto one = [&](int c) {
      char buf[8];
      if (c >= 0x21 && c < 0x7F && c != ']' && c != '\\' && c != '-' && c != '^') {
        out.push_back(char(c));
      } else {
        snprintf(buf, sizeof buf, "\\x%02X", c);
        out += buf;
      }
    };
    one(i);
    if (j > i) {
      out.push_back('-');
      one(j);
    }
    i = j + 1;
  }
  return out + "]";
}

}  // namespace

std::string GrammarIr::ToText() const {
  std::string out;
  std::vector<int> depth;
  auto text = [&](auto&& self, ExprId id, int level) -> std::string {
    if (level > 200) return "...";
    const Expr& e = expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return "\"\"";
      case ExprKind::kBytes: {
        std::string s = "\"";
        for (unsigned char c : e.bytes) {
          if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            s.push_back(char(c));
          } else {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02X", c);
            s += buf;
          }
        }
        return s + "\"";
      }
      case ExprKind::kByteSet:
        return SetText(e.set);
      case ExprKind::kRuleRef:
        return rules_[static_cast<size_t>(e.rule)].name;
      case ExprKind::kSeq:
      case ExprKind::kChoice: {
        if (e.children.empty()) return "[]";
        std::string s = "(";
        for (size_t i = 0; i < e.children.size(); ++i) {
          if (i) s += e.kind == ExprKind::kSeq ? " " : " | ";
          s += self(self, e.children[i], level + 1);
        }
        return s + ")";
      }
      case ExprKind::kRepeat:
        return self(self, e.children[0], level + 1) + "{" + std::to_string(e.min) + "," +
               (e.max < 0 ? std::string() : std::to_string(e.max)) + "}";
    }
    return "";
  };
  for (const Rule& r : rules_) {
    if (r.body < 0) continue;
    out += r.name + " ::= " + text(text, r.body, 0) + "\n";
  }
  return out;
}

}  // namespace m3::grammar
