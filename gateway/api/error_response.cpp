// OpenAI error responses for every failure (see error_response.h).
#include "gateway/api/error_response.h"

#include "gateway/anthropic/error_body.h"
#include "gateway/net/api_error.h"
#include "gateway/net/http_server.h"
#include "gateway/openai/request_error.h"
#include "shared/log.h"

namespace m3::api {

namespace http = boost::beast::http;

net::HttpResponse JsonBodyResponse(int status, std::string body) {
  net::HttpResponse res = net::JsonResponse(status, body);
  if (status == 429 || status == 503) res.set(http::field::retry_after, "1");
  return res;
}

net::HttpResponse ErrorResponse(int status, std::string_view message, std::string_view code,
                                std::optional<std::string> param) {
  return JsonBodyResponse(status,
                          openai::ErrorBody(status, message, std::move(param), code).dump());
}

net::HttpResponse ErrorResponse(ErrorStyle style, int status, std::string_view message,
                                std::string_view code) {
  if (style == ErrorStyle::kOpenAi) return ErrorResponse(status, message, code);
  return JsonBodyResponse(status, anthropic::ErrorBody(status, message).dump());
}

net::HttpResponse ErrorResponseFor(std::exception_ptr error, ErrorStyle style) {
  const bool openai = style == ErrorStyle::kOpenAi;
  try {
    std::rethrow_exception(error);
  } catch (const openai::RequestError& e) {
    return JsonBodyResponse(e.http_status(),
                            openai ? openai::ErrorBody(e).dump()
                                   : anthropic::ErrorBody(e.http_status(), e.what()).dump());
  } catch (const Error& e) {
    // ParamErrors (media fetch and decoding) name their field; both map by ErrorCode the way
    // /v1/preprocess answers them.
    const int status = net::HttpStatusFor(e.code());
    if (status >= 500 && e.code() == ErrorCode::kInternal) {
      Log(LogLevel::kError, "api: internal error: ", e.what());
    }
    if (openai) return JsonBodyResponse(status, net::OpenAiErrorBody(e).dump());
    std::string message = e.what();
    // Anthropic's errors have no param field: the message must name it.
    if (const auto* p = dynamic_cast<const net::ParamError*>(&e);
        p && !p->param().empty() && message.find(p->param()) == std::string::npos) {
      message = p->param() + ": " + message;
    }
    return ErrorResponse(style, status, message, "");
  } catch (const std::bad_alloc&) {
    return ErrorResponse(style, 503, "the server is out of memory; retry later", "out_of_memory");
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "api: unexpected error: ", e.what());
    return ErrorResponse(style, 500, "internal error", "internal_error");
  }
}

}  // namespace m3::api
