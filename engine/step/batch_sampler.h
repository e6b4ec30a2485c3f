// BatchSampler: picks the next token of every sequence that produced logits in a step, each
// with its own SamplingParams, in vLLM's order: logit_bias, repetition / presence / frequency
// penalties, min_tokens (stop and eos ids masked) and the row's allowed-token bitmask (a
// grammar's), temperature, top-k, top-p, min-p, and logprobs with the top n. The random
// draw for a sequence's n-th generated token is CounterUniform(seed, n), so its choice depends
// only on its own logits and history; it walks the kept tokens in ascending id (the inverse CDF
// in id order), which the GPU sampler (kernels/cuda/sampling.cuh) reproduces. Candidate sets
// are found with selection (nth_element) and only the survivors are sorted, never the whole
// vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/step/sampling_params.h"

namespace m3::engine {

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                        // of the model's distribution (raw logits)
  std::vector<std::pair<int32_t, float>> top;  // top `logprobs` tokens, most likely first
};

struct SampleRow {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt;  // penalties see the prompt (repetition) and output tokens
  std::span<const int32_t> output;  // generated so far; its size is the draw counter
  // Tokens this row may draw (a grammar's next-token mask): bit t % 32 of word t / 32 set means
  // allowed; ceil(vocab / 32) words. Empty: every token.
  std::span<const uint32_t> allowed = {};
};

class BatchSampler {
 public:
  explicit BatchSampler(int64_t vocab);
  int64_t vocab() const { return vocab_; }
  // logits: [rows.size(), vocab] row-major; results in `out` (resized).
  void Sample(const float* logits, std::span<const SampleRow> rows, std::vector<SampledToken>& out);
  // One row (what Sample does per row).
  SampledToken SampleOne(const float* logits, const SampleRow& row);

 private:
  int64_t vocab_;
  std::vector<float> work_;      // processed logits of the current row
  std::vector<int32_t> counts_;  // output token counts of the current row (reset via touched_)
  std::vector<uint8_t> seen_;    // prompt or output token present
  std::vector<int32_t> touched_;
  std::vector<int32_t> index_;  // candidate ids
};

}  // namespace m3::engine
