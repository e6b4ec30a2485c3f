// Generating text by walking a GrammarMatcher with random allowed tokens, as a sampler would:
// each step's bitmask picks the candidates; past a length budget the walk prefers tokens that
// close a value (so unconstrained strings end). Shared by the grammar tests and the benchmark.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace m3::test {

struct WalkResult {
  std::string text;
  bool terminated = false;
  int steps = 0;
  std::string error;  // a mask / accept disagreement
};

// closer: past the budget, tokens that continue writing it also count as closing (an XML
// end tag).
// check: also verify, for a few tokens outside and inside each mask, that AcceptToken
// agrees with the mask (then Rollback).
inline WalkResult RandomWalk(grammar::GrammarMatcher& m, const grammar::TokenizerVocab& vocab,
                             std::mt19937_64& rng, int budget = 48, int max_steps = 4000,
                             bool check = false, const std::string& closer = "") {
  WalkResult r;
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed, closing, continuing;
  for (; r.steps < max_steps; ++r.steps) {
    // How much of `closer` the text already ends with: the next preferred piece continues it.
    size_t progress = 0;
    for (size_t k = std::min(closer.size(), r.text.size()); k > 0; --k)
      if (r.text.compare(r.text.size() - k, k, closer, 0, k) == 0) {
        progress = k;
        break;
      }
    if (progress == closer.size()) progress = 0;
    m.FillNextTokenBitmask(mask.data());
    allowed.clear();
    closing.clear();
    continuing.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      uint32_t bits = mask[w];
      while (bits) {
        int b = __builtin_ctz(bits);
        bits &= bits - 1;
        auto id = static_cast<int32_t>(w * 32 + static_cast<size_t>(b));
        allowed.push_back(id);
        if (vocab.is_stop(id)) {
          closing.push_back(id);
        } else if (r.steps >= budget) {
          const std::string& t = vocab.bytes(id);
          if (!closer.empty() && closer.compare(progress, t.size(), t) == 0) {
            continuing.push_back(id);
          } else if (t.size() <= 2 && t.find_first_not_of("\"]},>") == std::string::npos) {
            closing.push_back(id);
          }
        }
      }
    }
    if (allowed.empty()) {
      r.error = "dead end after " + std::to_string(r.text.size()) + " bytes: " + r.text;
      return r;
    }
    if (check) {
      // Tokens outside the mask must be refused; inside, accepted.
      for (int k = 0; k < 6; ++k) {
        auto id = static_cast<int32_t>(rng() % vocab.size());
        bool in = (mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u;
        if (vocab.is_stop(id)) continue;
        bool ok = m.AcceptToken(id);
        if (ok) m.Rollback(1);
        if (ok != in) {
          r.error = "mask says " + std::to_string(in) + " but AcceptToken says " +
                    std::to_string(ok) + " for token " + std::to_string(id) + " '" +
                    vocab.bytes(id) + "' after: " + r.text;
          return r;
        }
      }
    }
    bool prefer_close = !closing.empty() && (r.steps >= budget || (rng() % 4 == 0));
    const auto& pool = !continuing.empty() ? continuing : prefer_close ? closing : allowed;
    int32_t id = pool[rng() % pool.size()];
    if (!m.AcceptToken(id)) {
      r.error = "allowed token " + std::to_string(id) + " refused after: " + r.text;
      return r;
    }
    if (vocab.is_stop(id)) {
      r.terminated = true;
      return r;
    }
    r.text += vocab.bytes(id);
  }
  r.error = "no end after " + std::to_string(max_steps) + " tokens: " + r.text.substr(0, 400);
  return r;
}

}  // namespace m3::test
