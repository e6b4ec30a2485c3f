// CloseHeads: the epsilon closure of a head set over calls and returns, deduplicated.
#include "grammar/pda_stack.h"

#include <algorithm>

namespace m3::grammar {

bool CloseHeads(const Automaton& a, StackStore& store, std::vector<Head>& heads,
                std::vector<Head>& scratch) {
  bool end = false;
  scratch.clear();
  std::vector<Head>& seen = scratch;  // small sets: a linear scan beats hashing
  std::vector<Head> work(heads.begin(), heads.end());
  heads.clear();
  while (!work.empty()) {
    Head h = work.back();
    work.pop_back();
    if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
    seen.push_back(h);
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
