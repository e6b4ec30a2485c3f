// GrammarMatcher: the head set of one generation (automaton states with their stacks), a
// bounded history of head sets for Rollback, and the per-step token bitmask: the union of the
// states' precomputed accepted tokens plus their context-dependent tokens checked against the
// real stacks, walked in trie order so consecutive checks share their common prefix.
#include <algorithm>
#include <cstring>
#include <deque>

#include "grammar/compiled_grammar.h"
#include "grammar/pda_stack.h"
#include "grammar/vocab_trie.h"

namespace m3::grammar {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const CompiledGrammarData> data)
    : data_(std::move(data)) {}
const TokenizerVocab& CompiledGrammar::vocab() const {
  return *data_->vocab;
}
const std::shared_ptr<const TokenizerVocab>& CompiledGrammar::vocab_ptr() const {
  return data_->vocab;
}
size_t CompiledGrammar::memory_bytes() const {
  return data_->automaton.memory_bytes() + data_->text.size() + data_->mask_bytes();
}
std::string CompiledGrammar::DebugText() const {
  return data_->text;
}
void CompiledGrammar::WarmMasks(int deadline_ms) const {
  data_->PrecomputeMasks(deadline_ms);
}
size_t CompiledGrammar::masks_ready() const {
  return data_->masks_computed();
}

namespace {
struct Snapshot {
  std::vector<Head> heads;
  bool can_end = false;
  bool terminated = false;
};
}  // namespace

struct GrammarMatcher::State {
  StackStore store;
  std::deque<Snapshot> history;  // back(): now
  int max_rollback = 16;
  std::vector<Head> scratch, tmp;
  std::vector<std::vector<Head>> levels;
  std::vector<uint8_t> level_end;
  std::vector<StateId> done;
  bool head_limit_hit = false;  // a step needed more than kMaxHeads parses
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int max_rollback)
    : grammar_(std::move(grammar)), state_(std::make_unique<State>()) {
  Require(grammar_ != nullptr, ErrorCode::kInvalidArgument, "GrammarMatcher: null grammar");
  state_->max_rollback = std::max(0, max_rollback);
  Reset();
}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::Reset() {
  const Automaton& a = grammar_->data().automaton;
  State& st = *state_;
  st.store.Clear();
  st.history.clear();
  st.head_limit_hit = false;
  Snapshot s;
  s.heads = {Head{a.root_start, -1}};
  s.can_end = CloseHeads(a, st.store, s.heads, st.scratch);
  st.history.push_back(std::move(s));
}

namespace {

// Reads `bytes` from `heads`; returns whether the text is accepted and sets end_after.
bool Advance(const Automaton& a, StackStore& store, const std::vector<Head>& heads,
             std::string_view bytes, std::vector<Head>& out, bool& end_after,
             std::vector<Head>& tmp, std::vector<Head>& scratch) {
  out = heads;
  end_after = false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    end_after = StepHeads(a, store, out, static_cast<uint8_t>(bytes[i]), tmp, scratch);
    out.swap(tmp);
    if (out.empty()) return end_after && i + 1 == bytes.size();
  }
  return true;
}

}  // namespace

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  State& st = *state_;
  const Snapshot& now = st.history.back();
  if (now.terminated) return false;
  if (bytes.empty()) return true;
  Snapshot next;
  bool end = false;
  st.store.overflowed = false;
  bool ok = Advance(grammar_->data().automaton, st.store, now.heads, bytes, next.heads, end, st.tmp,
                    st.scratch);
  if (st.store.overflowed) st.head_limit_hit = true;
  if (!ok || st.store.overflowed) return false;
  next.can_end = end;
  st.history.push_back(std::move(next));
  while (st.history.size() > static_cast<size_t>(st.max_rollback) + 1) st.history.pop_front();
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t token) {
  const TokenizerVocab& vocab = grammar_->vocab();
  if (token < 0 || static_cast<size_t>(token) >= vocab.size()) return false;
  State& st = *state_;
  const Snapshot& now = st.history.back();
  if (now.terminated) return false;
  if (vocab.is_stop(token)) {
    if (!now.can_end) return false;
    Snapshot next;
    next.terminated = true;
    next.can_end = true;
    st.history.push_back(std::move(next));
    while (st.history.size() > static_cast<size_t>(st.max_rollback) + 1) st.history.pop_front();
    return true;
  }
  if (!vocab.matchable(token)) return false;
  return AcceptBytes(vocab.bytes(token));
}

void GrammarMatcher::FillNextTokenBitmask(uint32_t* words) {
  const CompiledGrammarData& data = grammar_->data();
  const TokenizerVocab& vocab = *data.vocab;
  const Automaton& a = data.automaton;
  const VocabTrie& trie = vocab.trie();
  size_t nwords = vocab.mask_words();
  std::memset(words, 0, nwords * sizeof(uint32_t));
  State& st = *state_;
  const Snapshot& now = st.history.back();
  auto set_stops = [&] {
    for (int32_t id : vocab.stop_ids())
      words[static_cast<size_t>(id) / 32] |= 1u << (static_cast<unsigned>(id) % 32);
  };
  if (now.terminated) {
    set_stops();
    return;
  }
  // Context-independent parts: one union per distinct state.
  std::vector<StateId>& done = st.done;
  done.clear();
  for (const Head& h : now.heads) {
    if (std::find(done.begin(), done.end(), h.state) != done.end()) continue;
    done.push_back(h.state);
    const StateMask& m = data.Mask(h.state);
    if (!m.accepted_bits.empty()) {
      const uint32_t* src = m.accepted_bits.data();
      for (size_t w = 0; w < nwords; ++w) words[w] |= src[w];
    } else {
      for (int32_t id : m.accepted_ids)
        words[static_cast<size_t>(id) / 32] |= 1u << (static_cast<unsigned>(id) % 32);
    }
  }
  // Context-dependent tokens: each checked against this head's real stack.
  for (const Head& h : now.heads) {
    const StateMask& m = data.Mask(h.state);
    if (m.uncertain_nodes.empty()) continue;
    if (st.levels.empty()) {
      st.levels.resize(trie.max_depth + 2);
      st.level_end.assign(trie.max_depth + 2, 0);
    }
    st.levels[0].assign(1, h);
    const std::string* prev = nullptr;
    size_t valid = 0;  // levels[0..valid] hold the heads after prev's first bytes
    for (int32_t node : m.uncertain_nodes) {
      auto first = static_cast<size_t>(trie.token_begin[static_cast<size_t>(node)]);
      int32_t id0 = trie.ids[first];
      if (words[static_cast<size_t>(id0) / 32] >> (static_cast<unsigned>(id0) % 32) & 1u)
        continue;  // another head already allows it
      const std::string& bytes = vocab.bytes(id0);
      size_t lcp = 0;
      if (prev) {
        size_t lim = std::min(prev->size(), bytes.size());
        while (lcp < lim && (*prev)[lcp] == bytes[lcp]) ++lcp;
      }
      size_t d = std::min(lcp, valid);
      bool dead = false;
      st.store.overflowed = false;
      while (d < bytes.size()) {
        if (st.levels[d].empty()) {
          dead = true;
          break;
        }
        st.level_end[d + 1] = StepHeads(a, st.store, st.levels[d], static_cast<uint8_t>(bytes[d]),
                                        st.levels[d + 1], st.scratch)
                                  ? 1
                                  : 0;
        ++d;
      }
      valid = d;
      prev = &bytes;
      size_t len = bytes.size();
      bool accepted =
          !dead && !st.store.overflowed && (!st.levels[len].empty() || st.level_end[len]);
      if (st.store.overflowed) valid = 0;  // levels past the overflow are not trustworthy
      if (accepted)
        for (int32_t k = trie.token_begin[static_cast<size_t>(node)];
             k < trie.token_begin[static_cast<size_t>(node) + 1]; ++k) {
          int32_t id = trie.ids[static_cast<size_t>(k)];
          words[static_cast<size_t>(id) / 32] |= 1u << (static_cast<unsigned>(id) % 32);
        }
    }
  }
  if (now.can_end) set_stops();
}

std::string GrammarMatcher::ForcedBytes(size_t max_bytes) const {
  const Automaton& a = grammar_->data().automaton;
  State& st = *state_;
  const Snapshot& now = st.history.back();
  std::string out;
  if (now.terminated || now.can_end) return out;
  std::vector<Head> heads = now.heads, next;
  while (out.size() < max_bytes && !heads.empty()) {
    int only = -1;
    for (int b = 0; b < 256; ++b) {
      bool any = false;
      for (const Head& h : heads)
        if (a.Step(h.state, static_cast<uint8_t>(b)) >= 0) any = true;
      if (!any) continue;
      if (only >= 0) return out;
      only = b;
    }
    if (only < 0) return out;
    bool end = StepHeads(a, st.store, heads, static_cast<uint8_t>(only), next, st.scratch);
    out.push_back(static_cast<char>(only));
    heads.swap(next);
    if (end) return out;
  }
  return out;
}

bool GrammarMatcher::CanTerminate() const {
  const Snapshot& now = state_->history.back();
  return now.can_end && !now.terminated;
}
bool GrammarMatcher::IsTerminated() const {
  return state_->history.back().terminated;
}
bool GrammarMatcher::IsDeadEnd() const {
  const Snapshot& now = state_->history.back();
  return !now.terminated && ((now.heads.empty() && !now.can_end) || state_->head_limit_hit);
}

void GrammarMatcher::Rollback(int tokens) {
  State& st = *state_;
  Require(tokens >= 0 && static_cast<size_t>(tokens) < st.history.size(),
          ErrorCode::kInvalidArgument,
          "GrammarMatcher::Rollback(" + std::to_string(tokens) + "): only " +
              std::to_string(st.history.size() - 1) + " accepted tokens can be undone");
  for (int i = 0; i < tokens; ++i) st.history.pop_back();
}

}  // namespace m3::grammar
