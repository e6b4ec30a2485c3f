// NgramProposer: the backwards search for the trailing n-gram.
#include "engine/spec/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace m3::engine::spec {

NgramProposer::NgramProposer(int64_t min_n, int64_t max_n) : min_n_(min_n), max_n_(max_n) {
  Require(min_n >= 1 && min_n <= max_n, ErrorCode::kInvalidArgument,
          "n-gram lookup needs 1 <= min n (" + std::to_string(min_n) + ") <= max n (" +
              std::to_string(max_n) + ")");
}

void NgramProposer::Propose(std::span<const DraftRequest> requests,
                            std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    ProposeOne(requests[i].tokens, requests[i].max_drafts, drafts[i]);
}

void NgramProposer::ProposeOne(std::span<const int32_t> tokens, int64_t max_drafts,
                               std::vector<int32_t>& out) const {
  out.clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0) return;
  for (int64_t n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // The most recent earlier occurrence: its continuation is likeliest to be repeated now.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, tokens.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min(max_drafts, len - from);
      out.assign(tokens.begin() + from, tokens.begin() + from + take);
      return;
    }
  }
}

}  // namespace m3::engine::spec
