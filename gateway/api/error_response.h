// Every failure the API answers, as one error response in the shape of the API the request
// came in by (OpenAI's error object, or Anthropic's for the Messages API): RequestErrors
// (request validation) keep their status, code and param; ParamErrors and plain m3::Errors of
// the media and template layers are mapped by their ErrorCode; anything else is a 500 whose
// detail goes to the log, not to the client. 429 and 503 carry Retry-After.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/net/http_exchange.h"

namespace m3::api {

// The error body shape: OpenAI's {"error": {message, type, param, code}}, or Anthropic's
// {"type": "error", "error": {type, message}}.
enum class ErrorStyle { kOpenAi, kAnthropic };

net::HttpResponse ErrorResponse(int status, std::string_view message, std::string_view code,
                                std::optional<std::string> param = std::nullopt);
net::HttpResponse ErrorResponse(ErrorStyle style, int status, std::string_view message,
                                std::string_view code);
// A JSON body built elsewhere (GenerationResponder's bodies) with its status.
net::HttpResponse JsonBodyResponse(int status, std::string body);
// The response for a caught exception (call inside a catch block or with current_exception()).
net::HttpResponse ErrorResponseFor(std::exception_ptr error,
                                   ErrorStyle style = ErrorStyle::kOpenAi);

}  // namespace m3::api
