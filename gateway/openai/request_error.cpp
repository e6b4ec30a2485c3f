// OpenAI error objects (see request_error.h).
#include "gateway/openai/request_error.h"

#include <utility>

namespace m3::openai {
namespace {

// Quoted client bytes may be any bytes; the JSON serializer throws on invalid UTF-8.
std::string ValidUtf8(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Unquote(const std::string& dumped) {
  return nlohmann::json::parse(dumped).get<std::string>();
}

std::string_view TypeFor(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

RequestError::RequestError(ErrorCode kind, std::string message, std::string param, std::string code)
    : Error(kind, message),
      status_(HttpStatusOf(kind)),
      param_(std::move(param)),
      code_(std::move(code)) {}

std::string_view RequestError::type() const {
  return TypeFor(status_);
}

nlohmann::json ErrorBody(int http_status, std::string_view message,
                         std::optional<std::string> param, std::string_view code) {
  nlohmann::json error = {{"message", Unquote(ValidUtf8(message))},
                          {"type", TypeFor(http_status)},
                          {"param", nullptr},
                          {"code", std::string(code)}};
  if (param && !param->empty()) error["param"] = Unquote(ValidUtf8(*param));
  return {{"error", std::move(error)}};
}

nlohmann::json ErrorBody(const RequestError& error) {
  return ErrorBody(error.http_status(), error.what(), error.param(), error.error_code());
}

}  // namespace m3::openai
