// HTTP routing and staging for the preprocessing service (see preprocess_http.h).
#include "gateway/preprocess/preprocess_http.h"

#include <optional>
#include <string>
#include <utility>

#include "gateway/net/api_error.h"
#include "shared/log.h"

namespace m3::preprocess {
namespace {

namespace http = boost::beast::http;

// Bodies up to this size are parsed on the network thread (well under a millisecond); larger
// ones (inline media) on the fetch pool, so a big body never stalls other connections.
constexpr size_t kInlineParseBytes = 256 * 1024;

net::HttpResponse ErrorResponse(const Error& e) {
  net::HttpResponse res =
      net::JsonResponse(net::HttpStatusFor(e.code()), net::OpenAiErrorBody(e).dump());
  if (e.code() == ErrorCode::kResourceExhausted) res.set(http::field::retry_after, "1");
  return res;
}

net::HttpResponse QueueFull() {
  return ErrorResponse(
      Error(ErrorCode::kResourceExhausted, "the preprocessing queue is full; retry later"));
}

std::string_view Path(const net::HttpRequest& request) {
  std::string_view target = request.target();
  return target.substr(0, target.find('?'));
}

// Refusals decided by the request line alone; nullopt when the route exists and the method fits.
std::optional<net::HttpResponse> RouteRefusal(const net::HttpRequest& request) {
  const std::string_view path = Path(request);
  if (path == "/health") {
    if (request.method() == http::verb::get || request.method() == http::verb::head) {
      return std::nullopt;
    }
    net::HttpResponse res = net::JsonResponse(
        405,
        net::OpenAiErrorBody(405, "use GET /health", std::nullopt, "method_not_allowed").dump());
    res.set(http::field::allow, "GET, HEAD");
    return res;
  }
  if (path != "/v1/preprocess") {
    return net::JsonResponse(
        404, net::OpenAiErrorBody(404, "no route for " + std::string(path.substr(0, 200)),
                                  std::nullopt, "not_found")
                 .dump());
  }
  if (request.method() != http::verb::post) {
    net::HttpResponse res = net::JsonResponse(
        405,
        net::OpenAiErrorBody(405, "use POST /v1/preprocess", std::nullopt, "method_not_allowed")
            .dump());
    res.set(http::field::allow, "POST");
    return res;
  }
  return std::nullopt;
}

// The response for a finished request (encoded on the worker, inside the reservation).
net::HttpResponse Encode(ResponseFormat format, PreprocessResult* result,
                         std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
    if (format == ResponseFormat::kJson) {
      return net::JsonResponse(200, EncodeJson(*result).dump());
    }
    net::HttpResponse res{http::status::ok, 11};
    res.set(http::field::content_type, "application/octet-stream");
    res.body() = EncodeSafetensors(*result);
    return res;
  } catch (const Error& e) {
    return ErrorResponse(e);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "preprocess failed: ", e.what());
    return ErrorResponse(Error(ErrorCode::kInternal, "internal error"));
  }
}

// Parses and admits the body, then starts the work; errors are answered at once.
void Admit(std::shared_ptr<const PreprocessService> service, PreprocessPools pools,
           const std::string& body, net::Responder respond) {
  PreprocessRequest request;
  try {
    request = ParsePreprocessRequest(body);
    service->Admit(request);
  } catch (const Error& e) {
    return respond(ErrorResponse(e));
  }
  const ResponseFormat format = request.format;
  StartPreprocess(std::move(service), pools, std::move(request),
                  [format, respond](PreprocessResult* result, std::exception_ptr error) {
                    respond(Encode(format, result, error));
                  });
}

}  // namespace

net::HttpHeaderCheck MakePreprocessHeaderCheck(PreprocessPools pools) {
  return [pools](const net::HttpRequest& header) -> std::optional<net::HttpResponse> {
    if (auto refusal = RouteRefusal(header)) return refusal;
    // Nothing would take the work: say so before the client sends the body.
    if (Path(header) == "/v1/preprocess" && pools.workers->full()) return QueueFull();
    return std::nullopt;
  };
}

net::HttpHandler MakePreprocessHttpHandler(std::shared_ptr<const PreprocessService> service,
                                           PreprocessPools pools) {
  return [service, pools](net::HttpRequest&& request, net::Responder respond) {
    if (auto refusal = RouteRefusal(request)) return respond(std::move(*refusal));
    if (Path(request) == "/health") {
      nlohmann::json health = {{"status", "ok"},
                               {"queued", pools.workers->queued()},
                               {"running", pools.workers->running()},
                               {"fetching", pools.fetch->running()}};
      return respond(net::JsonResponse(200, health.dump()));
    }
    if (request.body().size() <= kInlineParseBytes) {
      return Admit(service, pools, request.body(), std::move(respond));
    }
    auto body = std::make_shared<std::string>(std::move(request.body()));
    const bool queued = pools.fetch->TrySubmit([service, pools, body, respond] {
      std::string text = std::move(*body);
      Admit(service, pools, text, respond);
    });
    if (!queued) respond(QueueFull());
  };
}

}  // namespace m3::preprocess
