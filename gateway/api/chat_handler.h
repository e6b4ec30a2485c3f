// POST /v1/chat/completions: the body parsed and validated (ChatRequest), its media fetched
// and preprocessed and its prompt built (chat_prompt), then generated on the engines and
// answered through the exchange, whole or as server-sent events.
#pragma once

#include <chrono>
#include <memory>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleChatCompletion(const ServingContext& ctx, net::HttpRequest&& request,
                          std::shared_ptr<net::HttpExchange> exchange,
                          std::chrono::steady_clock::time_point arrival);

}  // namespace m3::api
