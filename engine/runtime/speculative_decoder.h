// SpeculativeDecoder: speculative decoding inside the engine loop. Before each step it asks the
// proposer for drafts for the sequences about to decode (Sequence::drafts; the scheduler runs
// each as one verify chunk of 1 + k rows after the plain decodes, with logits at every row);
// after the step it lays out the sampler rows of the verified sequences (one per row, each with
// its history extended by the drafts before it: draft_acceptance.h) and turns the picks into
// the tokens each sequence emits. The per-step draft count comes from SpeculationBackoff.
// Counters (drafts proposed and accepted, verified sequence-steps) feed EngineStats.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/runtime/scheduler.h"
#include "engine/runtime/sequence.h"
#include "engine/spec/draft_proposer.h"
#include "engine/spec/speculation_backoff.h"
#include "engine/spec/speculative_config.h"
#include "engine/step/batch_sampler.h"

namespace m3::engine {

struct SpeculativeStats {
  int64_t proposed = 0;  // drafts verified
  int64_t accepted = 0;  // drafts the target accepted
  int64_t steps = 0;     // verified sequence-steps (one sequence's verify in one step)
};

class SpeculativeDecoder {
 public:
  // free_rows: SpeculationBackoff's rows a step takes at about one row's cost.
  SpeculativeDecoder(const spec::SpeculativeConfig& config,
                     std::unique_ptr<spec::DraftProposer> proposer, int64_t free_rows,
                     int64_t max_model_len);

  // What the runner must capture for the proposer (the target's hidden states; SetCapture).
  CaptureRequest capture();
  // Sets the drafts of the running sequences that decode next (their last token generated and
  // not yet run), clearing everyone else's.
  void Propose(std::span<Sequence* const> running);
  // After Commit: hands the proposer the rows each sequence kept, with the captured hidden
  // states (proposers that read them).
  void Observe(const ScheduledStep& step);
  // The sampler rows of step.sampled: one per plain sequence, 1 + drafts per verified one.
  void SampleRows(const ScheduledStep& step, std::vector<SampleRow>& rows);
  // The row of SampleRows' `rows` where each sampled sequence's rows start (step.sampled
  // order): whatever masks a plain sequence's row needs (e.g. a grammar's) goes there.
  const std::vector<size_t>& first_rows() const { return first_rows_; }
  // The picks of SampleRows' rows -> the tokens each sampled sequence emits (its accepted
  // drafts, then the target's pick after them), in step.sampled order.
  void Accept(const ScheduledStep& step, std::span<const SampledToken> picks,
              std::vector<std::vector<SampledToken>>& emitted);

  const SpeculativeStats& stats() const { return stats_; }
  const spec::SpeculativeConfig& config() const { return config_; }

 private:
  spec::SpeculativeConfig config_;
  std::unique_ptr<spec::DraftProposer> proposer_;
  spec::SpeculationBackoff backoff_;
  int64_t max_model_len_;
  SpeculativeStats stats_;
  std::vector<spec::DraftRequest> requests_;
  std::vector<Sequence*> proposing_;
  std::vector<std::vector<int32_t>> drafts_;
  std::vector<std::vector<int32_t>> histories_;  // per sampled sequence, while rows point in
  std::vector<size_t> first_rows_;
  std::vector<int64_t> layers_;  // target layers the proposer reads
  NamedTensors captured_;        // the runner's capture of the last step
};

}  // namespace m3::engine
