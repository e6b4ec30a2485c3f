// MessagesRequest: a validated Anthropic `POST /v1/messages` (or `/v1/messages/count_tokens`)
// body, translated into the internal chat request the OpenAI path serves (openai::ChatRequest),
// so prompt assembly, media preprocessing, sampling and output parsing are shared:
//   system (string or text blocks)            -> a leading system message
//   user text / image blocks                  -> user content parts (image_url: base64 as data:)
//   user tool_result blocks                   -> "tool" messages, before the user's other blocks
//   assistant text / thinking / tool_use      -> content, reasoning_content, tool_calls
//   tools {name, description, input_schema}   -> function tools
//   tool_choice auto / none / any / tool      -> auto / none / required / a named function
//                                                (disable_parallel_tool_use: one call)
//   thinking enabled / disabled               -> chat_template_kwargs.thinking_mode
//   max_tokens, temperature, top_p, top_k, stop_sequences -> the sampling request
// Errors are openai::RequestErrors naming the Anthropic field; the handler words them in
// Anthropic's error shape.
#pragma once

#include <optional>
#include <string>

#include "gateway/openai/chat_request.h"

namespace m3::anthropic {

using Json = openai::Json;

enum class MessagesEndpoint {
  kCreate,       // /v1/messages: max_tokens required, stream allowed
  kCountTokens,  // /v1/messages/count_tokens: no sampling fields
};

struct MessagesRequest {
  openai::ChatRequest chat;  // messages, tools, media, sampling, stream as the OpenAI path has them
  std::optional<bool> thinking;  // the request's thinking.type (enabled: true); unset: absent
};

// Throws openai::RequestError: 400 for wrong types and values (the param is the Anthropic
// field path, e.g. "messages[1].content[0].source.media_type"), 404 for another model, 413 for
// too many messages, media items or tools, 422 for a tool_choice naming an unknown tool.
MessagesRequest ParseMessagesRequest(const Json& body, const openai::ServedModel& model,
                                     const openai::ApiLimits& limits, MessagesEndpoint endpoint);

}  // namespace m3::anthropic
