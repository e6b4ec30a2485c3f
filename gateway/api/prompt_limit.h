// How many prompt tokens are worth tokenizing: a body at the size limit is 64 MiB of text, and
// tokenizing all of it costs about a second, so tokenizing stops once the count is known to be
// too many (Tokenizer::Encode's max_ids). For a generation that is the model's context (nothing
// can be generated past it); /tokenize and count_tokens count up to kMaxCountedTokens.
#pragma once

#include <cstddef>
#include <string>

#include "gateway/api/serving_context.h"

namespace m3::api {

// Twice the longest context (524,288), and the most ids /detokenize takes back in one array.
inline constexpr size_t kMaxCountedTokens = size_t{1} << 20;

// The max_ids for a generation's prompt: the model's context (SIZE_MAX when not known yet).
size_t GenerationMaxIds(const ServingContext& ctx);

// A generation's prompt passed GenerationMaxIds: 400 context_length_exceeded naming `param`.
[[noreturn]] void ThrowPromptOverContext(const ServingContext& ctx, const std::string& param);

// /tokenize or count_tokens passed kMaxCountedTokens: 413 naming `param`.
[[noreturn]] void ThrowOverCountLimit(const std::string& param);

}  // namespace m3::api
