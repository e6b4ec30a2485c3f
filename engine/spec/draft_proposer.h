// DraftProposer: what speculative decoding needs from a source of draft tokens. Given each
// sequence's tokens so far (prompt + output, the last one not yet run through the target), it
// proposes up to `max_drafts` tokens to follow; the target verifies them all in one forward
// (engine/runtime/speculative_decoder.h) and keeps the longest exact prefix. A proposer may
// return fewer (or none): that sequence then decodes plainly this step.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace m3::engine::spec {

struct DraftRequest {
  std::span<const int32_t> tokens;  // prompt + generated, in order
  int64_t prompt_len = 0;
  int64_t max_drafts = 0;
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual std::string name() const = 0;
  // drafts is resized to requests.size(); drafts[i] holds at most requests[i].max_drafts ids.
  virtual void Propose(std::span<const DraftRequest> requests,
                       std::vector<std::vector<int32_t>>& drafts) = 0;
};

}  // namespace m3::engine::spec
