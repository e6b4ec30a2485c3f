// Anthropic error objects (see error_body.h).
#include "gateway/anthropic/error_body.h"

#include <string>

namespace m3::anthropic {

std::string_view ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json ErrorBody(int status, std::string_view message) {
  const std::string valid = nlohmann::json(std::string(message))
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return {{"type", "error"},
          {"error",
           {{"type", ErrorType(status)},
            {"message", nlohmann::json::parse(valid).get<std::string>()}}}};
}

}  // namespace m3::anthropic
