// The route table and early refusals (see api_server.h).
#include "gateway/api/api_server.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "gateway/api/chat_handler.h"
#include "gateway/api/completion_handler.h"
#include "gateway/api/error_response.h"
#include "gateway/api/health_handler.h"
#include "gateway/api/messages_handler.h"
#include "gateway/api/metered_exchange.h"
#include "gateway/api/model_list.h"
#include "gateway/api/tokenize_handler.h"
#include "gateway/preprocess/preprocess_http.h"

namespace m3::api {
namespace {

namespace http = boost::beast::http;
using Route = ApiServer::Route;

struct RouteInfo {
  Route route;
  http::verb method;
  const char* label;  // the metrics' endpoint label
  bool authenticated;
};

constexpr std::string_view kModelPrefix = "/v1/models/";

std::string_view PathOf(const net::HttpRequest& request) {
  const std::string_view target = request.target();
  return target.substr(0, target.find('?'));
}

std::optional<RouteInfo> Lookup(std::string_view path) {
  static const std::pair<std::string_view, RouteInfo> kRoutes[] = {
      {"/v1/chat/completions", {Route::kChat, http::verb::post, "/v1/chat/completions", true}},
      {"/v1/completions", {Route::kCompletions, http::verb::post, "/v1/completions", true}},
      {"/v1/messages", {Route::kMessages, http::verb::post, "/v1/messages", true}},
      {"/v1/messages/count_tokens",
       {Route::kCountTokens, http::verb::post, "/v1/messages/count_tokens", true}},
      {"/v1/models", {Route::kModels, http::verb::get, "/v1/models", true}},
      {"/tokenize", {Route::kTokenize, http::verb::post, "/tokenize", true}},
      {"/detokenize", {Route::kDetokenize, http::verb::post, "/detokenize", true}},
      {"/v1/preprocess", {Route::kPreprocess, http::verb::post, "/v1/preprocess", true}},
      {"/health", {Route::kHealth, http::verb::get, "/health", false}},
      {"/ready", {Route::kReady, http::verb::get, "/ready", false}},
      {"/metrics", {Route::kMetrics, http::verb::get, "/metrics", false}},
  };
  for (const auto& [p, info] : kRoutes) {
    if (p == path) return info;
  }
  if (path.size() > kModelPrefix.size() && path.substr(0, kModelPrefix.size()) == kModelPrefix) {
    return RouteInfo{Route::kModel, http::verb::get, "/v1/models/{model}", true};
  }
  return std::nullopt;
}

bool KeyMatches(std::string_view given, const std::vector<std::string>& keys) {
  bool match = false;
  for (const std::string& key : keys) {
    // Constant time in the key's bytes: a timing side channel would leak a valid key.
    if (key.size() == given.size() && CRYPTO_memcmp(key.data(), given.data(), key.size()) == 0) {
      match = true;
    }
  }
  return match;
}

struct KeyCheck {
  bool sent = false;   // a bearer token or x-api-key came with the request
  bool valid = false;  // it is one of the configured keys
};

// Either header may carry the key (OpenAI clients send a bearer token, Anthropic's send
// x-api-key); one that is sent must be valid.
KeyCheck CheckKey(const ServingContext& ctx, const net::HttpRequest& head) {
  const std::string_view auth = head[http::field::authorization];
  const auto x_api_key = head.find("x-api-key");
  // RFC 9110 11.1: the auth scheme is case-insensitive ("bearer KEY" is as good as "Bearer").
  constexpr std::string_view kBearer = "bearer ";
  const bool bearer = auth.size() > kBearer.size() &&
                      std::equal(kBearer.begin(), kBearer.end(), auth.begin(), [](char a, char b) {
                        return a == std::tolower(static_cast<unsigned char>(b));
                      });
  KeyCheck check;
  check.sent = bearer || x_api_key != head.end();
  check.valid = x_api_key != head.end()
                    ? KeyMatches(x_api_key->value(), ctx.options().api_keys)
                    : bearer && KeyMatches(auth.substr(kBearer.size()), ctx.options().api_keys);
  return check;
}

// Paths of the Anthropic Messages API, whose refusals use Anthropic's error shape.
ErrorStyle StyleOf(std::string_view path) {
  constexpr std::string_view kMessages = "/v1/messages";
  const bool anthropic = path.substr(0, kMessages.size()) == kMessages &&
                         (path.size() == kMessages.size() || path[kMessages.size()] == '/');
  return anthropic ? ErrorStyle::kAnthropic : ErrorStyle::kOpenAi;
}

// The refusal the request head alone decides, if any.
std::optional<net::HttpResponse> Refusal(const ServingContext& ctx, const net::HttpRequest& head,
                                         std::optional<RouteInfo>* found) {
  const std::string_view path = PathOf(head);
  const ErrorStyle style = StyleOf(path);
  const std::optional<RouteInfo> route = Lookup(path);
  if (found) *found = route;
  if (!route) {
    return ErrorResponse(style, 404, "no route for " + std::string(path.substr(0, 200)),
                         "not_found");
  }
  const bool head_of_get = route->method == http::verb::get && head.method() == http::verb::head;
  if (head.method() != route->method && !head_of_get) {
    net::HttpResponse res = ErrorResponse(
        style, 405, "use " + std::string(http::to_string(route->method)) + " " + std::string(path),
        "method_not_allowed");
    res.set(http::field::allow, http::to_string(route->method));
    return res;
  }
  if (route->authenticated && !ctx.options().api_keys.empty()) {
    const KeyCheck key = CheckKey(ctx, head);
    if (!key.valid) {
      net::HttpResponse res = ErrorResponse(
          style, 401,
          key.sent ? "the API key is not valid"
                   : "an API key is required: send it as 'Authorization: Bearer <key>' or "
                     "'x-api-key: <key>'",
          "invalid_api_key");
      res.set(http::field::www_authenticate, "Bearer");
      return res;
    }
  }
  if (route->method == http::verb::post) {
    std::string type(head[http::field::content_type]);
    type = type.substr(0, type.find(';'));
    type.erase(
        std::remove_if(type.begin(), type.end(), [](unsigned char c) { return std::isspace(c); }),
        type.end());
    std::transform(type.begin(), type.end(), type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // No Content-Type at all is read as JSON (as curl -d sends form types, clients that send
    // one must mean it).
    if (!type.empty() && type != "application/json") {
      return ErrorResponse(
          style, 415,
          "the body must be JSON (Content-Type: application/json), not " + type.substr(0, 100),
          "unsupported_media_type");
    }
    // RFC 9110 15.5.16: a content coding the server does not decode is a 415, not a body to
    // read as JSON (a gzip body would otherwise be "not valid JSON").
    std::string coding(head[http::field::content_encoding]);
    coding.erase(std::remove_if(coding.begin(), coding.end(),
                                [](unsigned char c) { return std::isspace(c); }),
                 coding.end());
    std::transform(coding.begin(), coding.end(), coding.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!coding.empty() && coding != "identity") {
      net::HttpResponse res =
          ErrorResponse(style, 415,
                        "request bodies are not decoded: send it without Content-Encoding (got '" +
                            coding.substr(0, 100) + "')",
                        "unsupported_content_encoding");
      res.set(http::field::accept_encoding, "identity");
      return res;
    }
  }
  if ((route->route == Route::kChat || route->route == Route::kCompletions ||
       route->route == Route::kMessages) &&
      ctx.saturated()) {
    return ErrorResponse(style, 429, "the server has too many requests in flight; retry later",
                         "too_many_requests");
  }
  if (route->route == Route::kPreprocess && ctx.pools().workers->full()) {
    return ErrorResponse(429, "the preprocessing queue is full; retry later", "queue_full");
  }
  return std::nullopt;
}

}  // namespace

ApiServer::ApiServer(std::shared_ptr<const ServingContext> ctx)
    : ctx_(std::move(ctx)),
      preprocess_(preprocess::MakePreprocessHttpHandler(ctx_->media_service_ptr(), ctx_->pools())) {
}

net::ExchangeHandler ApiServer::Handler() {
  auto self = shared_from_this();
  return [self](net::HttpRequest&& request, std::shared_ptr<net::HttpExchange> exchange) {
    self->Handle(std::move(request), std::move(exchange));
  };
}

net::HttpHeaderCheck ApiServer::HeaderCheck() {
  auto ctx = ctx_;
  return [ctx](const net::HttpRequest& head) { return Refusal(*ctx, head, nullptr); };
}

std::function<void(const net::HttpRequest&, int)> ApiServer::RefusalCounter() {
  auto ctx = ctx_;
  return [ctx](const net::HttpRequest& head, int status) {
    const std::optional<RouteInfo> route = Lookup(PathOf(head));
    ctx->metrics().RecordRequest(route ? route->label : "other", status, 0.0);
  };
}

std::function<net::HttpResponse(const std::string&)> ApiServer::ShutdownResponse() {
  auto ctx = ctx_;
  return [ctx](const std::string& target) {
    const std::string_view path = std::string_view(target).substr(0, target.find('?'));
    const std::optional<RouteInfo> route = Lookup(path);
    ctx->metrics().RecordRequest(route ? route->label : "other", 503, 0.0);
    return ErrorResponse(StyleOf(path), 503,
                         "the server is shutting down: the request was still being prepared "
                         "(parsed, rendered or tokenized) when the grace period ended",
                         "server_shutting_down");
  };
}

void ApiServer::Handle(net::HttpRequest&& request, std::shared_ptr<net::HttpExchange> exchange) {
  const auto arrival = std::chrono::steady_clock::now();
  const ServingContext& ctx = *ctx_;
  std::optional<RouteInfo> route;
  std::optional<net::HttpResponse> refusal = Refusal(ctx, request, &route);
  exchange = MakeMeteredExchange(std::move(exchange), ctx.metrics(), route ? route->label : "other",
                                 arrival);
  if (refusal) return exchange->Respond(std::move(*refusal));
  const ErrorStyle style = StyleOf(PathOf(request));
  try {
    switch (route->route) {
      case Route::kChat:
        return HandleChatCompletion(ctx, std::move(request), std::move(exchange), arrival);
      case Route::kCompletions:
        return HandleCompletion(ctx, std::move(request), std::move(exchange), arrival);
      case Route::kMessages:
        return HandleMessages(ctx, std::move(request), std::move(exchange), arrival);
      case Route::kCountTokens:
        return HandleCountTokens(ctx, std::move(request), std::move(exchange));
      case Route::kModels:
        return HandleModelList(ctx, *exchange);
      case Route::kModel:
        return HandleModel(ctx, PathOf(request).substr(kModelPrefix.size()), *exchange);
      case Route::kTokenize:
        return HandleTokenize(ctx, std::move(request), std::move(exchange));
      case Route::kDetokenize:
        return HandleDetokenize(ctx, std::move(request), std::move(exchange));
      case Route::kPreprocess:
        return preprocess_(std::move(request), [exchange](net::HttpResponse res) {
          exchange->Respond(std::move(res));
        });
      case Route::kHealth:
        return HandleHealth(*exchange);
      case Route::kReady:
        // Engine addresses and their errors only to callers with a key (when keys are
        // configured) or where --ready-details says the network is trusted.
        return HandleReady(ctx, *exchange,
                           ctx.options().ready_details ||
                               (!ctx.options().api_keys.empty() && CheckKey(ctx, request).valid));
      case Route::kMetrics:
        return HandleMetrics(ctx, *exchange);
    }
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception(), style));
  }
}

}  // namespace m3::api
