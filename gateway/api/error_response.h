// Every failure the API answers, as one OpenAI error response: RequestErrors (request
// validation) keep their status, code and param; ParamErrors and plain m3::Errors of the media
// and template layers are mapped by their ErrorCode; anything else is a 500 whose detail goes to
// the log, not to the client. 429 and 503 carry Retry-After.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/net/http_exchange.h"

namespace m3::api {

net::HttpResponse ErrorResponse(int status, std::string_view message, std::string_view code,
                                std::optional<std::string> param = std::nullopt);
// A JSON body built elsewhere (GenerationResponder's bodies) with its status.
net::HttpResponse JsonBodyResponse(int status, std::string body);
// The response for a caught exception (call inside a catch block or with current_exception()).
net::HttpResponse ErrorResponseFor(std::exception_ptr error);

}  // namespace m3::api
