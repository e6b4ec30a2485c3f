// Prompt token bounds (see prompt_limit.h).
#include "gateway/api/prompt_limit.h"

#include <cstdint>

#include "gateway/openai/request_error.h"

namespace m3::api {

size_t GenerationMaxIds(const ServingContext& ctx) {
  const int64_t len = ctx.max_model_len();
  return len > 0 ? static_cast<size_t>(len) : SIZE_MAX;
}

void ThrowPromptOverContext(const ServingContext& ctx, const std::string& param) {
  const std::string len = std::to_string(ctx.max_model_len());
  throw openai::RequestError(ErrorCode::kInvalidArgument,
                             "the prompt is more than " + len +
                                 " tokens, which leaves no room in the model's context of " + len +
                                 " tokens",
                             param, "context_length_exceeded");
}

void ThrowOverCountLimit(const std::string& param) {
  throw openai::RequestError(ErrorCode::kTooLarge,
                             "the text is more than " + std::to_string(kMaxCountedTokens) +
                                 " tokens, the most this endpoint counts",
                             param, "too_many_tokens");
}

}  // namespace m3::api
