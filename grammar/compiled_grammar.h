// CompiledGrammarData: what a compile produces and matchers share read-only: the automaton and,
// for every scanning state, its token mask split by what the state alone decides: tokens
// accepted whatever the stack below (a list or a bitset), and tokens whose fate depends on the
// stack (they leave the current rule): checked at run time. Tokens in neither are rejected.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/grammar.h"

namespace m3::grammar {

struct StateMask {
  std::vector<int32_t> accepted_ids;     // when small
  std::vector<uint32_t> accepted_bits;   // otherwise (mask_words() words)
  std::vector<int32_t> uncertain_nodes;  // trie nodes (preorder) of context-dependent tokens
};

struct CompiledGrammarData {
  std::shared_ptr<const TokenizerVocab> vocab;
  Automaton automaton;
  std::vector<StateMask> masks;  // per automaton state (empty for non-scanning states)
  std::string text;              // GBNF of the lowered grammar
  double compile_ms = 0;
};

// Fills data.masks by walking the vocabulary trie from every scanning state.
void BuildTokenMasks(CompiledGrammarData& data, const CompileLimits& limits);

}  // namespace m3::grammar
