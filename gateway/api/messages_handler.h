// The Anthropic Messages API: POST /v1/messages and POST /v1/messages/count_tokens. The body
// is validated and translated into the internal chat request (anthropic::MessagesRequest), its
// media and prompt built as for chat completions (chat_prompt), then generated on the engines
// and answered as an Anthropic message, whole or as its event stream (or, for count_tokens,
// the prompt's length); every failure in Anthropic's error shape.
#pragma once

#include <chrono>
#include <memory>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleMessages(const ServingContext& ctx, net::HttpRequest&& request,
                    std::shared_ptr<net::HttpExchange> exchange,
                    std::chrono::steady_clock::time_point arrival);

void HandleCountTokens(const ServingContext& ctx, net::HttpRequest&& request,
                       std::shared_ptr<net::HttpExchange> exchange);

}  // namespace m3::api
