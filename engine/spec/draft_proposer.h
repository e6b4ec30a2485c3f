// DraftProposer: what speculative decoding needs from a source of draft tokens. Given each
// sequence's tokens so far (prompt + output, the last one not yet run through the target), it
// proposes up to `max_drafts` tokens to follow; the target verifies them all in one forward
// (engine/runtime/speculative_decoder.h) and keeps the longest exact prefix. A proposer may
// return fewer (or none): that sequence then decodes plainly this step.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace m3::engine::spec {

struct DraftRequest {
  std::string_view id;              // the sequence (stateful proposers key their state by it)
  std::span<const int32_t> tokens;  // prompt + generated, in order
  int64_t prompt_len = 0;
  int64_t max_drafts = 0;
};

// The rows one target step computed and kept for a sequence, with the target's hidden states
// there (for proposers that read them: target_layers()).
struct ObservedRows {
  std::string_view id;
  std::span<const int32_t> tokens;  // the sequence's tokens after the step
  int64_t first_position = 0;
  int64_t rows = 0;
  // Per target_layers() entry: rows x hidden floats, the input of that target decoder layer
  // (its residual stream) at those positions.
  std::vector<const float*> hidden;
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual std::string name() const = 0;
  // Target decoder layers whose inputs Observe needs (empty: none, and no Observe calls).
  virtual std::vector<int64_t> target_layers() const { return {}; }
  // After each target step, the kept rows of every sequence that ran (before the next Propose).
  virtual void Observe(std::span<const ObservedRows> rows) {}
  // Forgets the state of every sequence not in `live` (finished, aborted).
  virtual void Retain(std::span<const std::string_view> live) {}
  // drafts is resized to requests.size(); drafts[i] holds at most requests[i].max_drafts ids.
  virtual void Propose(std::span<const DraftRequest> requests,
                       std::vector<std::vector<int32_t>>& drafts) = 0;
};

}  // namespace m3::engine::spec
