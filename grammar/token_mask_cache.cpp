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
  std::vector<StateId> simple;
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
  // Fast path: most walks spend their time in one plain state (inside a string, a number) with
  // an empty stack: simple[d] is that state, or -1 when levels[d] holds the general head set.
  auto& simple = w.simple;
  simple.assign(max_depth + 1, -1);
  auto plain = [&](StateId t) {
    auto ts = static_cast<size_t>(t);
    return !a.is_final[ts] && a.call_begin[ts] == a.call_begin[ts + 1];
  };
  if (plain(state)) simple[0] = state;
  const StateId* next = a.next.data();
  const auto ncls = static_cast<size_t>(a.num_classes);
  const uint16_t* depth_of = trie.depth.data();
  const uint8_t* byte_of = trie.byte.data();
  const int32_t* token_begin = trie.token_begin.data();
  for (size_t i = 1; i < nodes;) {
    size_t d = depth_of[i];
    uint8_t byte = byte_of[i];
    // Uncertain: some path left the rule at a shorter prefix into a byte that may follow it.
    bool inherit = uncertain[d - 1] || (exit_at[d - 1] && follow.test(byte));
    bool end = false, alive;
    StateId from = simple[d - 1];
    if (from >= 0) {
      StateId t = next[static_cast<size_t>(from) * ncls + a.byte_class[byte]];
      if (t >= 0 && plain(t)) {
        simple[d] = t;
        alive = true;
      } else {
        simple[d] = -1;
        levels[d].clear();
        if (t >= 0) {
          levels[d].push_back({t, -1});
          end = CloseHeads(a, store, levels[d], scratch);
        }
        alive = !levels[d].empty();
      }
    } else {
      end = StepHeads(a, store, levels[d - 1], byte, levels[d], scratch);
      alive = !levels[d].empty();
      simple[d] = -1;
      if (levels[d].size() == 1 && levels[d][0].stack < 0 && plain(levels[d][0].state))
        simple[d] = levels[d][0].state;
    }
    if (token_begin[i] < token_begin[i + 1]) {
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

CompiledGrammarData::~CompiledGrammarData() = default;

void CompiledGrammarData::InitMasks() {
  masks_ = std::make_unique<std::atomic<const StateMask*>[]>(automaton.num_states());
  for (size_t s = 0; s < automaton.num_states(); ++s) masks_[s].store(nullptr);
}

namespace {

uint64_t MaskHash(const StateMask& m) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::vector<int32_t>& v, uint64_t tag) {
    h = (h ^ tag) * 1099511628211ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  };
  mix(m.accepted_ids, 1);
  mix(m.uncertain_nodes, 2);
  h = (h ^ 3) * 1099511628211ull;
  for (uint32_t x : m.accepted_bits) h = (h ^ x) * 1099511628211ull;
  return h;
}

bool SameMask(const StateMask& a, const StateMask& b) {
  return a.accepted_ids == b.accepted_ids && a.accepted_bits == b.accepted_bits &&
         a.uncertain_nodes == b.uncertain_nodes;
}

}  // namespace

const StateMask& CompiledGrammarData::Mask(StateId s) const {
  std::atomic<const StateMask*>& slot = masks_[static_cast<size_t>(s)];
  const StateMask* m = slot.load(std::memory_order_acquire);
  if (m) return *m;
  StateMask fresh = ComputeStateMask(*this, s);
  uint64_t h = MaskHash(fresh);
  // States with equal masks (a bounded string's positions far from its bound, say) share one
  // copy: the memory of a grammar grows with its distinct masks, not its states.
  std::lock_guard lock(masks_mu_);
  m = slot.load(std::memory_order_acquire);
  if (m) return *m;  // another thread got here first
  const StateMask* shared = nullptr;
  for (const StateMask* candidate : by_hash_[h])
    if (SameMask(*candidate, fresh)) shared = candidate;
  if (!shared) {
    owned_.push_back(std::make_unique<StateMask>(std::move(fresh)));
    shared = owned_.back().get();
    by_hash_[h].push_back(shared);
    mask_bytes_ += sizeof(StateMask) + (shared->accepted_ids.size() + shared->accepted_bits.size() +
                                        shared->uncertain_nodes.size()) *
                                           4;
  }
  slot.store(shared, std::memory_order_release);
  return *shared;
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
  std::lock_guard lock(masks_mu_);
  return mask_bytes_;
}

}  // namespace m3::grammar
