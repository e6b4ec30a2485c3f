// GET /health (liveness: the process answers), GET /ready (readiness: 200 while at least one
// engine is admitted, else 503 with every engine's state, so a load balancer stops sending
// requests this gateway could only refuse; engine addresses, loads and raw errors only with
// `details`, as they map the internal network) and GET /metrics (the Prometheus text format).
#pragma once

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

void HandleHealth(net::HttpExchange& exchange);
void HandleReady(const ServingContext& ctx, net::HttpExchange& exchange, bool details);
void HandleMetrics(const ServingContext& ctx, net::HttpExchange& exchange);

}  // namespace m3::api
