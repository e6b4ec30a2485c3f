// Anthropic's error object, {"type": "error", "error": {"type", "message"}}, and the error
// type each HTTP status reads as (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503 and
// 529 overloaded_error, other 5xx api_error), so every failure of the Messages API, before or
// during a stream, has the shape Anthropic's SDKs turn into their typed errors.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace m3::anthropic {

std::string_view ErrorType(int http_status);

// Invalid UTF-8 in the message (a client's bytes quoted back) becomes U+FFFD, so the body
// always serializes.
nlohmann::ordered_json ErrorBody(int http_status, std::string_view message);

}  // namespace m3::anthropic
