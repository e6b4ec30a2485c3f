// The OpenAI-compatible API's route table: method + path -> handler, with the refusals that
// need only the request head decided before any body byte is read (unknown path 404, wrong
// method 405, missing or wrong API key 401, a body that is not JSON or comes with a
// Content-Encoding 415, a saturated server
// 429). Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/{name}],
// POST /tokenize, POST /detokenize, POST /v1/preprocess, the Anthropic Messages API's POST
// /v1/messages and POST /v1/messages/count_tokens (API keys apply to all of these, sent as
// "Authorization: Bearer <key>" or, as Anthropic's clients send it, "x-api-key: <key>"), and
// GET /health, /ready, /metrics (open, for probes and scrapers). Refusals of paths under
// /v1/messages are worded in Anthropic's error shape. Every response is counted in the metrics
// by endpoint and status.
#pragma once

#include <memory>

#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"
#include "gateway/net/http_server.h"

namespace m3::api {

class ApiServer : public std::enable_shared_from_this<ApiServer> {
 public:
  // `ctx` must outlive every request (the server's Stop returns before it is destroyed).
  explicit ApiServer(std::shared_ptr<const ServingContext> ctx);

  // For HttpServer: the handler (runs on a network thread and returns quickly; the work goes
  // to the pools and the engines) and the check of the request head.
  net::ExchangeHandler Handler();
  net::HttpHeaderCheck HeaderCheck();
  // For HttpServerOptions::on_refusal: counts the server's own refusals (429 for body memory)
  // in m3_gateway_requests_total under the request's route.
  std::function<void(const net::HttpRequest& header, int status)> RefusalCounter();
  // For HttpServerOptions::deadline_response: a 503 in the route's error shape (OpenAI's, or
  // Anthropic's under /v1/messages) for a request still being prepared when the shutdown grace
  // period ends, counted in the metrics.
  std::function<net::HttpResponse(const std::string& target)> ShutdownResponse();

  enum class Route {
    kChat,
    kCompletions,
    kMessages,
    kCountTokens,
    kModels,
    kModel,
    kTokenize,
    kDetokenize,
    kPreprocess,
    kHealth,
    kReady,
    kMetrics
  };

 private:
  void Handle(net::HttpRequest&& request, std::shared_ptr<net::HttpExchange> exchange);

  std::shared_ptr<const ServingContext> ctx_;
  net::HttpHandler preprocess_;
};

}  // namespace m3::api
