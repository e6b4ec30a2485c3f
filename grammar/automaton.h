// The byte-level pushdown automaton a GrammarIr compiles to: one deterministic automaton per
// called rule, whose edges read a byte class or call another rule (push the return state, start
// the callee). Small non-recursive rules are inlined into their callers, so most JSON Schema
// grammars become one automaton and their token masks depend on the state alone. Left recursion
// is refused (the matcher's closure would not terminate).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar_ir.h"

namespace m3::grammar {

using StateId = int32_t;

struct Automaton {
  // Bytes grouped into classes that every edge treats alike: transitions are a dense table.
  uint8_t byte_class[256] = {};
  int num_classes = 0;
  // next[state * num_classes + class]: the target, or -1.
  std::vector<StateId> next;
  std::vector<uint8_t> is_final;   // the rule may end here
  std::vector<uint8_t> has_bytes;  // at least one byte edge: a scanning state
  std::vector<RuleId> rule_of;     // the automaton rule a state belongs to
  // calls[call_begin[s] .. call_begin[s+1]): (callee start state, return state).
  std::vector<int32_t> call_begin;
  std::vector<std::pair<StateId, StateId>> calls;
  std::vector<StateId> rule_start;  // per rule; -1 for rules inlined everywhere
  std::vector<std::string> rule_names;
  // Per rule: the bytes that can come right after the rule ends, in any context it is called
  // from (empty for a root nothing calls): a token that leaves the rule into a byte outside
  // this set is rejected without looking at the stack.
  std::vector<ByteSet> follow;
  StateId root_start = -1;

  size_t num_states() const { return is_final.size(); }
  StateId Step(StateId s, uint8_t byte) const {
    return next[static_cast<size_t>(s) * static_cast<size_t>(num_classes) + byte_class[byte]];
  }
  size_t memory_bytes() const;
};

// Throws m3::Error: kTooLarge over the limits, kInvalidArgument for left recursion, a rule with
// no body, or a root that matches nothing.
Automaton BuildAutomaton(const GrammarIr& ir, const CompileLimits& limits);

}  // namespace m3::grammar
