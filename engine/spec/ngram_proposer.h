// NgramProposer: prompt lookup decoding (vLLM's "ngram" method). The last n tokens of a
// sequence are searched for earlier in its own prompt + output, n from max_n down to min_n;
// at the first n with a match, the tokens that followed the most recent earlier occurrence are
// proposed. No weights: it wins where outputs copy their context (code edits, quoting,
// extraction, repetitive answers).
#pragma once

#include <cstdint>

#include "engine/spec/draft_proposer.h"

namespace m3::engine::spec {

class NgramProposer : public DraftProposer {
 public:
  // Throws kInvalidArgument unless 1 <= min_n <= max_n.
  NgramProposer(int64_t min_n, int64_t max_n);
  std::string name() const override { return "ngram"; }
  void Propose(std::span<const DraftRequest> requests,
               std::vector<std::vector<int32_t>>& drafts) override;
  // One sequence (what Propose does per request).
  void ProposeOne(std::span<const int32_t> tokens, int64_t max_drafts,
                  std::vector<int32_t>& out) const;

 private:
  int64_t min_n_, max_n_;
};

}  // namespace m3::engine::spec
