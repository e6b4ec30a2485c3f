// The grammar intermediate form every source (JSON Schema, regex, EBNF, choice, structural)
// lowers to: named rules whose bodies are expressions over bytes. Unicode character classes are
// lowered to UTF-8 byte sequences here, so everything after this file works on bytes only.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace m3::grammar {

using ExprId = int32_t;
using RuleId = int32_t;
using ByteSet = std::bitset<256>;
using CodepointRange = std::pair<uint32_t, uint32_t>;  // inclusive

enum class ExprKind : uint8_t { kEmpty, kBytes, kByteSet, kRuleRef, kSeq, kChoice, kRepeat };

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  std::string bytes;  // kBytes
  ByteSet set;        // kByteSet
  RuleId rule = -1;   // kRuleRef
  std::vector<ExprId> children;
  int min = 0, max = 0;  // kRepeat: max -1 = unbounded
};

struct Rule {
  std::string name;
  ExprId body = -1;
};

// Owns expressions and rules; every constructor checks the limits (throws m3::Error).
class GrammarIr {
 public:
  explicit GrammarIr(const CompileLimits& limits) : limits_(limits) {}

  ExprId Empty();
  ExprId Literal(std::string_view bytes);
  ExprId Bytes(const ByteSet& set);
  // Code points in `ranges` (negate: every valid code point outside them), as UTF-8.
  ExprId Codepoints(std::vector<CodepointRange> ranges, bool negate = false);
  ExprId Ref(RuleId rule);
  ExprId Seq(std::vector<ExprId> items);
  ExprId Choice(std::vector<ExprId> items);
  ExprId Repeat(ExprId item, int min, int max);  // max -1: unbounded
  ExprId Optional(ExprId item) { return Repeat(item, 0, 1); }
  ExprId Star(ExprId item) { return Repeat(item, 0, -1); }

  RuleId AddRule(std::string name);              // body set later (rules may be referenced first)
  RuleId FindRule(std::string_view name) const;  // -1 when absent
  void SetBody(RuleId rule, ExprId body) { rules_[static_cast<size_t>(rule)].body = body; }

  const Expr& expr(ExprId id) const { return exprs_[static_cast<size_t>(id)]; }
  const std::vector<Rule>& rules() const { return rules_; }
  const CompileLimits& limits() const { return limits_; }
  size_t expr_count() const { return exprs_.size(); }
  RuleId root = -1;

  // GBNF text of the rules (for logs).
  std::string ToText() const;

 private:
  ExprId Add(Expr e);
  CompileLimits limits_;
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
};

// Code point ranges (sorted, merged) of the complement within valid Unicode scalar values.
std::vector<CodepointRange> Complement(std::vector<CodepointRange> ranges);
std::vector<CodepointRange> Normalize(std::vector<CodepointRange> ranges);
// Appends the UTF-8 encoding of code point c.
void AppendUtf8(uint32_t c, std::string& out);

}  // namespace m3::grammar
