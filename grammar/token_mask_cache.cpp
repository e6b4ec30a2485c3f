// The token-mask cache: for each scanning state, one preorder walk of the vocabulary trie with the
// state's heads per depth (the stack starting empty). A token is accepted when some path reads
// all of it without leaving the state's rule; context-dependent when it can only be read by
// leaving the rule (returning into a caller we do not know yet); rejected otherwise. A prefix
// with no heads left settles its whole subtree at once. Masks are computed once per state, at
// compile time or on first use.
#include <algorithm>
#include <chrono>

#include "grammar/compiled_grammar.h"
#include "grammar/pda_stack.h"
#include "grammar/vocab_trie.h"

namespace m3::grammar {

namespace {

// Scratch reused by one thread's walks.
struct Workspace {
  StackStore store;
  std::vector<std::vector<Head>> levels;
  std::vector<uint8_t> uncertain, exit_at;
  std::vector<Head> scratch;
  std::vector<int32_t> accepted;
};

}  // namespace

StateMask ComputeStateMask(const CompiledGrammarData& data, StateId state) {
  const Automaton& a = data.automaton;
  const TokenizerVocab& vocab = *data.vocab;
  const VocabTrie& trie = vocab.trie();
  thread_local Workspace w;
  size_t max_depth = trie.max_depth + 1;
  if (w.levels.size() < max_depth + 1) {
    w.levels.resize(max_depth + 1);
    // Per depth on the current path: a shorter prefix left the rule into a possible follower
    // (uncertain), and the rule can end right after this prefix (exit_at).
    w.uncertain.assign(max_depth + 1, 0);
    w.exit_at.assign(max_depth + 1, 0);
  }
  auto& levels = w.levels;
  auto& uncertain = w.uncertain;
  auto& exit_at = w.exit_at;
  auto& store = w.store;
  auto& scratch = w.scratch;
  auto& accepted = w.accepted;
  auto s = static_cast<size_t>(state);
  store.Clear();
  accepted.clear();
  StateMask result;
  StateMask& mask = result;
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
    mask.accepted_bits.assign(vocab.mask_words(), 0);
    for (int32_t id : accepted)
      mask.accepted_bits[static_cast<size_t>(id) / 32] |= 1u << (static_cast<unsigned>(id) % 32);
  }
  return result;
}

CompiledGrammarData::~CompiledGrammarData() {
  if (!masks_) return;
  for (size_t s = 0; s < automaton.num_states(); ++s) delete masks_[s].load();
}

void CompiledGrammarData::InitMasks() {
  masks_ = std::make_unique<std::atomic<const StateMask*>[]>(automaton.num_states());
  for (size_t s = 0; s < automaton.num_states(); ++s) masks_[s].store(nullptr);
}

const StateMask& CompiledGrammarData::Mask(StateId s) const {
  std::atomic<const StateMask*>& slot = masks_[static_cast<size_t>(s)];
  const StateMask* m = slot.load(std::memory_order_acquire);
  if (m) return *m;
  auto fresh = std::make_unique<StateMask>(ComputeStateMask(*this, s));
  const StateMask* expected = nullptr;
  if (slot.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel))
    return *fresh.release();
  return *expected;  // another thread won
}

void CompiledGrammarData::PrecomputeMasks(int deadline_ms) const {
  auto started = std::chrono::steady_clock::now();
  for (size_t s = 0; s < automaton.num_states(); ++s) {
    if (!automaton.has_bytes[s]) continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count();
    Require(ms <= deadline_ms, ErrorCode::kDeadlineExceeded,
            "grammar took longer than " + std::to_string(deadline_ms) +
                " ms to compile its token masks (CompileLimits::max_compile_ms)");
    Mask(static_cast<StateId>(s));
  }
}

size_t CompiledGrammarData::masks_computed() const {
  size_t n = 0;
  for (size_t s = 0; s < automaton.num_states(); ++s) n += masks_[s].load() != nullptr;
  return n;
}

size_t CompiledGrammarData::mask_bytes() const {
  size_t bytes = 0;
  for (size_t s = 0; s < automaton.num_states(); ++s)
    if (const StateMask* m = masks_[s].load())
      bytes += sizeof(StateMask) +
               (m->accepted_ids.size() + m->accepted_bits.size() + m->uncertain_nodes.size()) * 4;
  return bytes;
}

}  // namespace m3::grammar
