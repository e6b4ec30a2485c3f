// CompletionRequest: a validated OpenAI `POST /v1/completions` body: one prompt (a string, a
// list of token ids, or a list holding one of those), the sampling fields and stream options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/request_common.h"
#include "gateway/openai/sampling_request.h"
#include "gateway/openai/served_model.h"

namespace m3::openai {

struct CompletionRequest {
  std::string model;
  std::string prompt;               // the text prompt, or
  std::vector<int32_t> prompt_ids;  // the prompt as token ids (then prompt is empty)
  bool prompt_is_ids = false;
  SamplingRequest sampling;
  StreamOptions stream;
};

// Throws RequestError naming the field (400; 404 for another model). Token ids are checked
// against `vocab_size` when it is positive.
CompletionRequest ParseCompletionRequest(const Json& body, const ServedModel& model,
                                         const ApiLimits& limits, int64_t vocab_size);

}  // namespace m3::openai
