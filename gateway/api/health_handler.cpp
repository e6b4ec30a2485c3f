// /health, /ready, /metrics (see health_handler.h).
#include "gateway/api/health_handler.h"

#include <nlohmann/json.hpp>

#include "gateway/api/error_response.h"
#include "gateway/net/http_server.h"

namespace m3::api {

namespace http = boost::beast::http;

void HandleHealth(net::HttpExchange& exchange) {
  exchange.Respond(net::JsonResponse(200, R"({"status":"ok"})"));
}

void HandleReady(const ServingContext& ctx, net::HttpExchange& exchange, bool details) {
  nlohmann::json engines = nlohmann::json::array();
  std::string states;
  const auto& endpoints = ctx.router().endpoints();
  int64_t healthy = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const auto& e = endpoints[i];
    const std::string state(engine_client::EndpointStateName(e->state()));
    healthy += e->healthy() ? 1 : 0;
    // "engine": the label /metrics uses for it.
    nlohmann::json entry = {
        {"engine", std::to_string(i)}, {"state", state}, {"healthy", e->healthy()}};
    if (details) {
      entry["address"] = e->address();
      entry["outstanding"] = e->outstanding();
      if (!states.empty()) states += ", ";
      states += e->address() + " " + state;
      if (!e->healthy() && !e->last_error().empty()) states += " (" + e->last_error() + ")";
    }
    engines.push_back(std::move(entry));
  }
  if (ctx.router().healthy_count() > 0) {
    const nlohmann::json body = {{"status", "ready"},
                                 {"healthy_engines", healthy},
                                 {"total_engines", endpoints.size()},
                                 {"engines", std::move(engines)}};
    return exchange.Respond(net::JsonResponse(
        200, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  exchange.Respond(
      ErrorResponse(503,
                    "no engine can serve requests: " +
                        (details ? states
                                 : std::to_string(healthy) + " of " +
                                       std::to_string(endpoints.size()) + " engines healthy"),
                    "no_engine_available"));
}

void HandleMetrics(const ServingContext& ctx, net::HttpExchange& exchange) {
  net::HttpResponse res{http::status::ok, 11};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.body() = ctx.metrics().Render();
  res.prepare_payload();
  exchange.Respond(std::move(res));
}

}  // namespace m3::api
