// A chat-shaped request from its parsed body to a running generation, shared by
// /v1/chat/completions and /v1/messages: the prompt built (chat_prompt.h), the API's response
// formatter made for it, and the job launched (generation_launch.h). The two APIs differ only in
// the formatter, the id prefix and the shape of their errors.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "gateway/api/chat_prompt.h"
#include "gateway/api/error_response.h"
#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/response_formatter.h"

namespace m3::api {

struct ChatGenerationSpec {
  const char* id_prefix = "";  // "chatcmpl-", "msg_"
  ErrorStyle style = ErrorStyle::kOpenAi;
  // The response formatter for this prompt and request id (called once, before the job moves
  // the prompt's ids away).
  std::function<std::unique_ptr<openai::ResponseFormatter>(const ChatPrompt& prompt,
                                                           const std::string& request_id)>
      make_formatter;
};

// Runs on the worker that got the body; `admission` is held until the response is done. Every
// failure, now or once the prompt is built, is answered on `exchange` in spec.style.
void StartChatGeneration(const ServingContext& ctx, openai::ChatRequest request, size_t body_bytes,
                         const std::shared_ptr<net::HttpExchange>& exchange,
                         std::chrono::steady_clock::time_point arrival,
                         std::shared_ptr<void> admission, ChatGenerationSpec spec);

}  // namespace m3::api
