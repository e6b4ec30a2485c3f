// The choices of an n > 1 request put on the engines: n - 1 more admission slots (each choice
// is an engine request), then one GenerationSession per choice answered through a ChoiceFanIn.
// Choice i runs with seed + i when the client gave a seed (each session draws its own
// otherwise). All go to one engine, and choices 1..n-1 start once choice 0 has produced its
// first token: by then the prompt's KV pages are in that engine's prefix cache, so the other
// choices reuse them instead of computing the prompt again (started together, each would
// prefill it in the same step, before any page is registered).
#pragma once

#include <memory>

#include "gateway/api/exchange_sink.h"
#include "gateway/api/generation_responder.h"
#include "gateway/api/serving_context.h"
#include "gateway/engine_client/generation_session.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

// `extra` admission slots held by the returned pointer; throws RequestError 429 when the
// gateway cannot take that many more requests now.
std::shared_ptr<void> AdmitChoices(const ServingContext& ctx, int extra);

// `request`: choice 0's engine request (choice i's id gets "-i"). Throws RequestError 503 when
// no engine can serve.
void LaunchChoices(const ServingContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange,
                   engine_client::GenerationRequest request, int n, ResponseSink sink,
                   std::shared_ptr<SessionHandle> handle, FormatterFactory make_formatter);

}  // namespace m3::api
