// The runtime side of the pushdown automaton: stacks as interned persistent linked lists (so
// equal stacks are equal ids and head sets deduplicate cheaply), and one step of the automaton
// over a set of heads: read a byte, then close over calls (push) and rule ends (pop).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace m3::grammar {

// The most heads (parses in progress) one step may hold; past it the text is refused.
constexpr size_t kMaxHeads = 4096;

struct Head {
  StateId state;
  int32_t stack;  // -1: empty (the bottom)
  bool operator==(const Head& o) const { return state == o.state && stack == o.stack; }
};

class StackStore {
 public:
  int32_t Push(StateId ret, int32_t parent) {
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(ret)) << 32) | static_cast<uint32_t>(parent);
    auto [it, inserted] = ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
    if (inserted) nodes_.push_back({ret, parent});
    return it->second;
  }
  StateId ret(int32_t node) const { return nodes_[static_cast<size_t>(node)].ret; }
  int32_t parent(int32_t node) const { return nodes_[static_cast<size_t>(node)].parent; }
  size_t size() const { return nodes_.size(); }
  void Clear() {
    nodes_.clear();
    ids_.clear();
    overflowed = false;
  }
  bool overflowed = false;  // a closure went past kMaxHeads

 private:
  struct Node {
    StateId ret;
    int32_t parent;
  };
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> ids_;
};

// Expands `heads` in place to the scanning heads reachable without reading a byte; returns
// whether a rule end was reached with an empty stack (the grammar's end at run time; leaving
// the rule into an unknown caller when walking tokens at compile time).
bool CloseHeads(const Automaton& a, StackStore& store, std::vector<Head>& heads,
                std::vector<Head>& scratch);

// Reads one byte from every head into `out` (closed); returns the end flag as CloseHeads.
inline bool StepHeads(const Automaton& a, StackStore& store, const std::vector<Head>& heads,
                      uint8_t byte, std::vector<Head>& out, std::vector<Head>& scratch) {
  out.clear();
  for (const Head& h : heads) {
    StateId t = a.Step(h.state, byte);
    if (t >= 0) out.push_back({t, h.stack});
  }
  if (out.empty()) return false;
  // Fast path: one plain scanning state (inside a string, a number...).
  if (out.size() == 1) {
    auto s = static_cast<size_t>(out[0].state);
    if (!a.is_final[s] && a.call_begin[s] == a.call_begin[s + 1]) return false;
  }
  return CloseHeads(a, store, out, scratch);
}

}  // namespace m3::grammar
