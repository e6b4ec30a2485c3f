// SamplingRequest: the generation controls of an OpenAI request (max_tokens, temperature,
// top_p, top_k, min_p, seed, stop, penalties, logprobs, n, plus the vLLM extensions clients
// use: stop_token_ids, ignore_eos, min_tokens, skip_special_tokens,
// include_stop_str_in_output; logit_bias), validated and with unset values taken from the model's
// generation_config.json, then neutral values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/served_model.h"
#include "gateway/openai/structured_output_request.h"

namespace m3::openai {

enum class Endpoint { kChatCompletions, kCompletions };

struct SamplingRequest {
  std::optional<int64_t> max_tokens;  // unset: what the context leaves (ResolveMaxTokens)
  double temperature = 1.0;           // 0: greedy
  double top_p = 1.0;
  int64_t top_k = 0;  // 0: off
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  bool logprobs = false;  // return the chosen tokens' logprobs
  int top_logprobs = 0;   // and this many alternatives per token
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  // logit_bias: (token id, bias clamped to [-100, 100]) in ascending id, one entry per id.
  std::vector<std::pair<int32_t, float>> logit_bias;
  int n = 1;  // choices; each is its own engine request (seed + i when a seed is given)
  // The output's constraint (response_format, structured_outputs, guided_*, or a forced tool
  // call); none: unconstrained.
  std::optional<StructuredConstraint> structured;
};

// Reads the sampling fields of a request body. Chat takes logprobs (bool) + top_logprobs;
// completions take logprobs as the number of alternatives (0-5). Throws RequestError (400)
// naming the field for every wrong type or value, n outside [1, limits.max_choices] and best_of
// other than n.
SamplingRequest ParseSampling(const FieldReader& body, Endpoint endpoint, const ServedModel& model,
                              const ApiLimits& limits);

// The completion budget once the prompt length is known: the request's max_tokens, or all the
// context that is left. Throws RequestError (400, "context_length_exceeded") when the prompt
// plus max_tokens do not fit (max_model_len 0: no check, and an unset max_tokens needs it).
// `prompt_param`: the field a prompt too long for the context is blamed on ("messages" for
// chat, "prompt" for text completions).
int64_t ResolveMaxTokens(const SamplingRequest& sampling, size_t prompt_tokens,
                         int64_t max_model_len, const std::string& prompt_param = "messages");

}  // namespace m3::openai
