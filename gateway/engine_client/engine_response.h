// Reading a GenerateResponse for the response builders: per-token logprobs (the engine sends,
// per new token, the chosen token's logprob then its top alternatives), the finish reason,
// and usage.
#pragma once

#include <optional>
#include <vector>

#include "engine.pb.h"
#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::engine_client {

// One entry per token id of `response`, each with `top_logprobs` alternatives. Empty when the
// response carries no logprobs. Throws m3::Error(kInternal) when the counts do not add up.
std::vector<openai::TokenLogprob> TokenLogprobs(const engine::v1::GenerateResponse& response,
                                                int top_logprobs);

// Unset while the request runs (FINISH_REASON_UNSPECIFIED).
std::optional<text::FinishReason> FinishReasonOf(const engine::v1::GenerateResponse& response);

// From the last response of a request.
openai::Usage UsageOf(const engine::v1::GenerateResponse& last);

}  // namespace m3::engine_client
