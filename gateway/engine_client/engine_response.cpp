// GenerateResponse reading (see engine_response.h).
#include "gateway/engine_client/engine_response.h"

#include <string>

#include "shared/error.h"

namespace m3::engine_client {

namespace v1 = engine::v1;

std::vector<openai::TokenLogprob> TokenLogprobs(const v1::GenerateResponse& r, int top) {
  std::vector<openai::TokenLogprob> out;
  if (r.logprobs().empty()) return out;
  const size_t per_token = 1 + static_cast<size_t>(top);
  Require(static_cast<size_t>(r.logprobs_size()) == per_token * r.token_ids_size(),
          ErrorCode::kInternal,
          "the engine sent " + std::to_string(r.logprobs_size()) + " logprobs for " +
              std::to_string(r.token_ids_size()) + " tokens with " + std::to_string(top) +
              " alternatives each");
  for (int t = 0; t < r.token_ids_size(); ++t) {
    const size_t at = per_token * static_cast<size_t>(t);
    openai::TokenLogprob lp;
    lp.id = r.token_ids(t);
    lp.logprob = r.logprobs(static_cast<int>(at)).logprob();
    for (size_t k = 1; k < per_token; ++k) {
      const v1::TokenLogprob& alt = r.logprobs(static_cast<int>(at + k));
      lp.top.emplace_back(alt.token_id(), alt.logprob());
    }
    out.push_back(std::move(lp));
  }
  return out;
}

std::optional<text::FinishReason> FinishReasonOf(const v1::GenerateResponse& r) {
  switch (r.finish_reason()) {
    case v1::GenerateResponse::FINISH_REASON_STOP:
      return text::FinishReason::kStop;
    case v1::GenerateResponse::FINISH_REASON_LENGTH:
      return text::FinishReason::kLength;
    case v1::GenerateResponse::FINISH_REASON_ABORT:
      return text::FinishReason::kAbort;
    default:
      return std::nullopt;
  }
}

openai::Usage UsageOf(const v1::GenerateResponse& last) {
  return {last.prompt_tokens(), last.completion_tokens(), last.cached_prompt_tokens()};
}

}  // namespace m3::engine_client
