// HTTP routing for the preprocessing service (see preprocess_http.h).
#include "gateway/net/preprocess_http.h"

#include "gateway/net/api_error.h"
#include "shared/log.h"

namespace m3::net {
namespace {

namespace http = boost::beast::http;

HttpResponse ErrorResponse(const Error& e) {
  return JsonResponse(HttpStatusFor(e.code()), OpenAiErrorBody(e).dump());
}

HttpResponse Preprocess(const PreprocessService& service, const std::string& body) {
  try {
    PreprocessRequest request = ParsePreprocessRequest(body);
    PreprocessResult result = service.Run(request);
    if (request.format == ResponseFormat::kJson)
      return JsonResponse(200, EncodeJson(result).dump());
    HttpResponse res{http::status::ok, 11};
    res.set(http::field::content_type, "application/octet-stream");
    res.body() = EncodeSafetensors(result);
    return res;
  } catch (const Error& e) {
    return ErrorResponse(e);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "preprocess failed: ", e.what());
    return ErrorResponse(Error(ErrorCode::kInternal, "internal error"));
  }
}

}  // namespace

HttpHandler MakePreprocessHttpHandler(std::shared_ptr<const PreprocessService> service,
                                      std::shared_ptr<WorkerPool> pool) {
  return [service, pool](HttpRequest&& request, Responder respond) {
    std::string_view target = request.target();
    target = target.substr(0, target.find('?'));
    if (target == "/health") {
      if (request.method() != http::verb::get && request.method() != http::verb::head) {
        return respond(JsonResponse(
            405,
            OpenAiErrorBody(405, "use GET /health", std::nullopt, "method_not_allowed").dump()));
      }
      nlohmann::json health = {
          {"status", "ok"}, {"queued", pool->queued()}, {"running", pool->running()}};
      return respond(JsonResponse(200, health.dump()));
    }
    if (target != "/v1/preprocess") {
      return respond(JsonResponse(404, OpenAiErrorBody(404, "no route for " + std::string(target),
                                                       std::nullopt, "not_found")
                                           .dump()));
    }
    if (request.method() != http::verb::post) {
      HttpResponse res = JsonResponse(
          405, OpenAiErrorBody(405, "use POST /v1/preprocess", std::nullopt, "method_not_allowed")
                   .dump());
      res.set(http::field::allow, "POST");
      return respond(std::move(res));
    }
    auto body = std::make_shared<std::string>(std::move(request.body()));
    bool queued =
        pool->TrySubmit([service, body, respond] { respond(Preprocess(*service, *body)); });
    if (!queued) {
      respond(ErrorResponse(
          Error(ErrorCode::kResourceExhausted, "the preprocessing queue is full; retry later")));
    }
  };
}

}  // namespace m3::net
