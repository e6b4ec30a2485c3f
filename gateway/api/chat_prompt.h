// A chat request's prompt: its media fetched and preprocessed (media_stage), each item expanded
// to its placeholder run, the messages rendered with the model's chat template and tokenized
// (PromptBuilder). Shared by /v1/chat/completions and /tokenize with messages, so both count
// the same tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

#include "gateway/api/media_stage.h"
#include "gateway/api/serving_context.h"
#include "gateway/openai/chat_request.h"

namespace m3::api {

struct ChatPrompt {
  openai::ChatRequest request;
  text::AssembledPrompt prompt;
  std::shared_ptr<PreparedMedia> media;  // null when the request has none
};

using PromptDone =
    std::function<void(std::shared_ptr<ChatPrompt> prompt, std::exception_ptr error)>;

// Requests without media are built on the calling thread when `inline_ok` (small bodies: well
// under a millisecond), else on the worker pool; requests with media are prechecked here
// (throws ParamError: refused URLs are answered before anything is queued) and built on the
// worker that finishes their last item. `done` runs once (not when this throws). `abandoned`
// (optional) tells the media stage and the prompt's build that the client has gone, so they
// stop working for it. `max_ids`: PromptBuilder::Build's (prompt_limit.h); a prompt over it
// reaches `done` with prompt.over_max_ids set, for the caller to refuse in its own words.
void StartChatPrompt(const ServingContext& ctx, openai::ChatRequest request, bool inline_ok,
                     PromptDone done, MediaAbandoned abandoned = {}, size_t max_ids = SIZE_MAX);

}  // namespace m3::api
