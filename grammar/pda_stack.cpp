// CloseHeads: the epsilon closure of a head set over calls and returns, deduplicated.
#include "grammar/pda_stack.h"

#include <algorithm>
#include <unordered_set>

namespace m3::grammar {

bool CloseHeads(const Automaton& a, StackStore& store, std::vector<Head>& heads,
                std::vector<Head>& scratch) {
  bool end = false;
  scratch.clear();
  std::vector<Head>& seen = scratch;  // small sets: a linear scan beats hashing
  std::unordered_set<uint64_t> seen_large;
  auto key = [](const Head& h) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(h.state)) << 32) |
           static_cast<uint32_t>(h.stack);
  };
  std::vector<Head> work(heads.begin(), heads.end());
  heads.clear();
  while (!work.empty()) {
    Head h = work.back();
    work.pop_back();
    if (seen.size() < 64) {
      if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
      seen.push_back(h);
      if (seen.size() == 64)
        for (const Head& x : seen) seen_large.insert(key(x));
    } else {
      if (!seen_large.insert(key(h)).second) continue;
      // An ambiguous grammar can multiply its parses with every byte: past the bound the
      // matcher refuses the text (a dead end) rather than slow down without limit.
      if (seen_large.size() > kMaxHeads) {
        store.overflowed = true;
        heads.clear();
        return false;
      }
    }
    auto s = static_cast<size_t>(h.state);
    if (a.has_bytes[s]) heads.push_back(h);
    for (int32_t i = a.call_begin[s]; i < a.call_begin[s + 1]; ++i) {
      auto [callee, ret] = a.calls[static_cast<size_t>(i)];
      auto r = static_cast<size_t>(ret);
      // A tail call (the return state only ends the rule) keeps the stack as it is, so a
      // right-recursive rule reads any length of text in constant stack.
      bool tail = a.is_final[r] && !a.has_bytes[r] && a.call_begin[r] == a.call_begin[r + 1];
      work.push_back({callee, tail ? h.stack : store.Push(ret, h.stack)});
    }
    if (a.is_final[s]) {
      if (h.stack < 0) {
        end = true;
      } else {
        work.push_back({store.ret(h.stack), store.parent(h.stack)});
      }
    }
  }
  return end;
}

}  // namespace m3::grammar
