// BuildTokenMasks: for each scanning state, one preorder walk of the vocabulary trie with the
// state's heads per depth (the stack starting empty). A token is accepted when some path reads
// all of it without leaving the state's rule; context-dependent when it can only be read by
// leaving the rule (returning into a caller we do not know yet); rejected otherwise. A prefix
// with no heads left settles its whole subtree at once.
#include <algorithm>
#include <chrono>

#include "grammar/compiled_grammar.h"
#include "grammar/pda_stack.h"
#include "grammar/vocab_trie.h"

namespace m3::grammar {

void BuildTokenMasks(CompiledGrammarData& data, const CompileLimits& limits) {
  const Automaton& a = data.automaton;
  const TokenizerVocab& vocab = *data.vocab;
  const VocabTrie& trie = vocab.trie();
  size_t n = a.num_states();
  data.masks.assign(n, {});
  StackStore store;
  size_t max_depth = trie.max_depth + 1;
  std::vector<std::vector<Head>> levels(max_depth + 1);
  // Per depth on the current path: a shorter prefix left the rule into a possible follower
  // (uncertain), and the rule can end right after this prefix (exit_at).
  std::vector<uint8_t> uncertain(max_depth + 1, 0), exit_at(max_depth + 1, 0);
  std::vector<Head> scratch;
  std::vector<int32_t> accepted;
  auto started = std::chrono::steady_clock::now();
  size_t words = vocab.mask_words();
  for (size_t s = 0; s < n; ++s) {
    if (!a.has_bytes[s]) continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count();
    Require(ms <= limits.max_compile_ms, ErrorCode::kDeadlineExceeded,
            "grammar took longer than " + std::to_string(limits.max_compile_ms) +
                " ms to compile (CompileLimits::max_compile_ms)");
    store.Clear();
    StateMask& mask = data.masks[s];
    accepted.clear();
    levels[0].assign(1, Head{static_cast<StateId>(s), -1});
    uncertain[0] = 0;
    exit_at[0] = 0;
    const ByteSet& follow = a.follow[static_cast<size_t>(a.rule_of[s])];
    size_t nodes = trie.num_nodes();
    for (size_t i = 1; i < nodes;) {
      size_t d = trie.depth[i];
      uint8_t byte = trie.byte[i];
      // Uncertain: some path left the rule at a shorter prefix into a byte that may follow it.
      bool inherit = uncertain[d - 1] || (exit_at[d - 1] && follow.test(byte));
      bool end = StepHeads(a, store, levels[d - 1], byte, levels[d], scratch);
      bool alive = !levels[d].empty();
      if (trie.token_begin[i] < trie.token_begin[i + 1]) {
        if (alive || end) {
          for (int32_t k = trie.token_begin[i]; k < trie.token_begin[i + 1]; ++k)
            accepted.push_back(trie.ids[static_cast<size_t>(k)]);
        } else if (inherit) {
          mask.uncertain_nodes.push_back(static_cast<int32_t>(i));
        }
      }
      if (alive) {
        uncertain[d] = inherit ? 1 : 0;
        exit_at[d] = end ? 1 : 0;
        ++i;
        continue;
      }
      // No heads: every longer token under this prefix is settled here.
      auto stop = static_cast<size_t>(trie.subtree_end[i]);
      if (inherit || end) {
        bool branch_ok = inherit;
        for (size_t j = i + 1; j < stop; ++j) {
          if (!inherit && trie.depth[j] == d + 1) branch_ok = follow.test(trie.byte[j]);
          if (branch_ok && trie.token_begin[j] < trie.token_begin[j + 1])
            mask.uncertain_nodes.push_back(static_cast<int32_t>(j));
        }
      }
      i = stop;
    }
    if (accepted.size() * 32 < vocab.size()) {
      std::sort(accepted.begin(), accepted.end());
      mask.accepted_ids = accepted;
    } else {
      mask.accepted_bits.assign(words, 0);
      for (int32_t id : accepted)
        mask.accepted_bits[static_cast<size_t>(id) / 32] |= 1u << (static_cast<unsigned>(id) % 32);
    }
  }
}

}  // namespace m3::grammar
