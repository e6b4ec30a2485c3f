// SpeculativeConfig: which draft source the engine speculates with and how far
// (`--speculative-method`, `--num-speculative-tokens`, ...), and the proposer it makes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/spec/draft_proposer.h"

namespace m3::engine::spec {

enum class SpeculativeMethod { kNone, kNgram, kMtp, kEagle3 };

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  std::string model_dir;               // the draft model (eagle3)
  std::string target_model_dir;        // the target's (embeddings an EAGLE-3 draft shares)
  int64_t num_speculative_tokens = 3;  // k: drafts verified per sequence and step, at most
  int64_t ngram_min = 1;               // n-gram lookup: the shortest suffix matched
  int64_t ngram_max = 4;               //   and the longest, tried first
  // The per-step back-off (speculation_backoff.h); off: always k drafts where proposed.
  bool backoff = true;
  // Every decoding sequence of a step verifies the same k drafts, short proposals padded with
  // fillers: the step's sequences then all run 1 + k rows, which a GPU replays as a recorded
  // graph (decode_graph_cache.h) instead of launching op by op. Set for GPU devices with graphs.
  bool uniform_drafts = false;
  // The back-off's rows a step takes at about one row's cost (speculation_backoff.h): on a GPU
  // a decode step is bound by weight and KV reads up to tens of rows.
  int64_t backoff_free_rows = 32;
  // Measuring hook (M3_SPEC_FORCE_ACCEPTANCE=r, documented in the CLI usage): every decode is
  // given k drafts and each is accepted with probability r regardless of the target, so the
  // machinery can be timed on random weights at a chosen acceptance rate. Breaks exactness.
  double forced_acceptance = -1;
  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

// "none", "ngram", "mtp", "eagle3"; throws kInvalidArgument naming the choices otherwise.
SpeculativeMethod ParseSpeculativeMethod(const std::string& name);
std::string SpeculativeMethodName(SpeculativeMethod method);
// Checks the ranges (k in [1, 16], 1 <= ngram_min <= ngram_max, forced acceptance <= 1);
// throws kInvalidArgument naming the field.
void ValidateSpeculativeConfig(const SpeculativeConfig& config);
// The forced acceptance rate from M3_SPEC_FORCE_ACCEPTANCE (unset: -1); throws
// kInvalidArgument when it is not a number in [0, 1].
double ForcedAcceptanceFromEnv();

// The proposer of config.method for a target of `target_layers` decoder layers, `target_hidden`
// wide, with `target_vocab` tokens. Throws kUnsupported for a method this build cannot run yet,
// kInvalidArgument / kNotFound for a draft model that does not fit the target.
std::unique_ptr<DraftProposer> MakeDraftProposer(const SpeculativeConfig& config,
                                                 int64_t target_layers, int64_t target_hidden,
                                                 int64_t target_vocab);

}  // namespace m3::engine::spec
