// CompiledGrammarData: what a compile produces and matchers share read-only: the automaton and,
// for every scanning state, its token mask split by what the state alone decides: tokens
// accepted whatever the stack below (a list or a bitset), and tokens whose fate depends on the
// stack (they leave the current rule): checked at run time. Tokens in neither are rejected.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
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
  CompiledGrammarData() = default;
  CompiledGrammarData(const CompiledGrammarData&) = delete;
  CompiledGrammarData& operator=(const CompiledGrammarData&) = delete;
  ~CompiledGrammarData();

  std::shared_ptr<const TokenizerVocab> vocab;
  Automaton automaton;
  std::string text;  // GBNF of the lowered grammar
  double compile_ms = 0;

  // The mask of a scanning state: computed at compile time (CompileLimits::precompute_masks)
  // or on first use; the grammar stays logically immutable. Lock-free once computed; the first
  // computation takes a lock only to store the result (and share it with equal masks).
  const StateMask& Mask(StateId s) const;
  // Computes every scanning state's mask now; throws kDeadlineExceeded past `deadline_ms`.
  void PrecomputeMasks(int deadline_ms) const;
  size_t masks_computed() const;
  size_t mask_bytes() const;
  void InitMasks();  // after `automaton` is set

 private:
  mutable std::unique_ptr<std::atomic<const StateMask*>[]> masks_;
  mutable std::mutex masks_mu_;
  mutable std::vector<std::unique_ptr<StateMask>> owned_;
  mutable std::unordered_map<uint64_t, std::vector<const StateMask*>> by_hash_;
  mutable size_t mask_bytes_ = 0;
};

// One state's mask by a walk over the vocabulary trie.
StateMask ComputeStateMask(const CompiledGrammarData& data, StateId state);

}  // namespace m3::grammar
