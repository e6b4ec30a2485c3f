// Test sequences on hand-assigned KV pages and the ForwardBatch of one step over them, for the
// GPU tests that drive a runner or decoder graph directly (batched-equals-alone, decode graphs).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/step/model_runner.h"

namespace m3::test {

struct PagedSeq {
  std::vector<int32_t> tokens;  // all tokens so far (prompt, then generated)
  std::vector<int32_t> pages;
  int32_t cached = 0;  // tokens whose KV is in the cache
};

// One step over `seqs` in their order (decodes first, for num_decodes), each running its
// uncached tokens with its last row's logits wanted; block tables `width` pages wide (at least
// what the longest needs), -1 padded.
engine::ForwardBatch StepBatch(const std::vector<PagedSeq*>& seqs, int64_t page, int32_t width);

}  // namespace m3::test
