// POST /tokenize and POST /detokenize, in vLLM's shapes. /tokenize takes {"prompt": text,
// "add_special_tokens" (default true)} or a chat request's {"messages", "tools",
// "add_generation_prompt", "chat_template_kwargs"} (its media fetched and expanded, so the
// count is what a chat completion would send the engine), optionally "model" and
// "return_token_strs", and answers {"count", "max_model_len", "tokens", "token_strs"}.
// /detokenize takes {"tokens": [ids]} and answers {"prompt": text}.
#pragma once

#include <chrono>
#include <memory>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleTokenize(const ServingContext& ctx, net::HttpRequest&& request,
                    std::shared_ptr<net::HttpExchange> exchange);
void HandleDetokenize(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange);

}  // namespace m3::api
