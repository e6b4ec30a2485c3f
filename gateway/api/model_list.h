// GET /v1/models (the one served model, OpenAI's list shape with vLLM's max_model_len) and
// GET /v1/models/{name} (that model, or 404 for another name).
#pragma once

#include <memory>
#include <string_view>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleModelList(const ServingContext& ctx, net::HttpExchange& exchange);
void HandleModel(const ServingContext& ctx, std::string_view name, net::HttpExchange& exchange);

}  // namespace m3::api
