// The matchable tokens of a vocabulary as a byte trie laid out in preorder: a walk over it is a
// linear scan, and a rejected prefix skips its whole subtree with one jump (subtree_end).
#pragma once

#include <cstdint>
#include <vector>

namespace m3::grammar {

class TokenizerVocab;

struct VocabTrie {
  // Node 0 is the root (the empty prefix); nodes 1.. in preorder.
  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<int32_t> subtree_end;  // one past the last node of the subtree
  std::vector<int32_t> token_begin;  // tokens ending at node i: ids[token_begin[i]..[i+1])
  std::vector<int32_t> ids;
  size_t max_depth = 0;  // the longest token's length
  size_t num_nodes() const { return byte.size(); }

  static VocabTrie Build(const TokenizerVocab& vocab);
};

}  // namespace m3::grammar
