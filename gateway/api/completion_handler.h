// POST /v1/completions: a text prompt (tokenized with the model's special tokens, as vLLM
// does) or token ids, generated on the engines and answered as a text_completion, whole or
// as server-sent events.
#pragma once

#include <chrono>
#include <memory>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleCompletion(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange,
                      std::chrono::steady_clock::time_point arrival);

}  // namespace m3::api
