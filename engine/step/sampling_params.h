// SamplingParams of one request as the engine runs it: the request's values with the model's
// generation_config.json defaults filled in and checked (ResolveSamplingParams).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "shared/generation_config.h"

namespace m3::engine {

struct SamplingParams {
  double temperature = 1.0;         // 0: greedy
  double top_p = 1.0;               // (0, 1]
  int64_t top_k = 0;                // <= 0: off
  double min_p = 0.0;               // [0, 1]
  double repetition_penalty = 1.0;  // > 0; 1 = off (prompt and output tokens)
  double presence_penalty = 0.0;    // output tokens
  double frequency_penalty = 0.0;   // output tokens
  uint64_t seed = 0;
  int64_t max_tokens = 16;
  int64_t min_tokens = 0;  // stop and eos tokens cannot be drawn before this many
  std::vector<int32_t> stop_token_ids;
  std::vector<int32_t> eos_token_ids;  // the model's (generation_config.json, else config.json)
  bool ignore_eos = false;
  int32_t logprobs = 0;  // top logprobs per token (besides the chosen one); 0: none
  bool return_logprobs = false;
  // (token id, bias in [-100, 100]), ascending id: added to the raw logits first (vLLM's order:
  // bias, then penalties, then temperature and the truncations).
  std::vector<std::pair<int32_t, float>> logit_bias;
  bool greedy() const { return temperature <= 0.0 || top_k == 1; }
};

// The parts of a request that may be absent and then take the model's defaults.
struct SamplingRequest {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  double presence_penalty = 0.0, frequency_penalty = 0.0;
  std::optional<uint64_t> seed;
  int64_t max_tokens = 0;
  int64_t min_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = -1;  // < 0: no logprobs; 0: the chosen token's only; n: plus top n
  std::vector<std::pair<int32_t, float>> logit_bias;  // any order; ids checked, biases clamped
};

// Fills defaults (generation_config, else neutral values), draws a seed when none was given
// (from `fresh_seed`) and checks ranges. Throws kInvalidArgument naming the bad field.
SamplingParams ResolveSamplingParams(const SamplingRequest& request,
                                     const GenerationConfig& defaults,
                                     const std::vector<int64_t>& model_eos_ids, int64_t vocab,
                                     uint64_t fresh_seed);

}  // namespace m3::engine
