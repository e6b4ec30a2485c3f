// One mapping from m3::ErrorCode to what clients see: the HTTP status and OpenAI-style error
// body, and the gRPC status code. A refused media URL (SSRF guard, local-file policy) is a
// 400 invalid_request_error with code "media_url_refused", as OpenAI-compatible servers
// answer a URL they will not fetch; over gRPC it is INVALID_ARGUMENT, consistently. A media
// URL that cannot be fetched (kUnavailable: connection refused, DNS or TLS failure, the
// origin's 5xx) is likewise the client's input: 400 with code "media_fetch_failed" and
// INVALID_ARGUMENT; a fetch that runs out of time stays 504 "media_fetch_timeout".
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace m3::net {

// An m3::Error that names the request field it is about (OpenAI's "param"), e.g.
// "content[1].image_url.url".
class ParamError : public Error {
 public:
  ParamError(ErrorCode code, const std::string& message, std::string param)
      : Error(code, message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

// `error` as the client should see it when it came from one item of a request: an m3::Error
// becomes a ParamError naming `param` (its message prefixed with it); a ParamError, which
// already names its field, and anything else pass through unchanged.
std::exception_ptr NameParam(std::exception_ptr error, const std::string& param);

int HttpStatusFor(ErrorCode code);
std::string_view ErrorCodeSlug(ErrorCode code);  // the "code" field, e.g. "media_url_refused"
int GrpcStatusCodeFor(ErrorCode code);           // a grpc::StatusCode value

// {"error": {"message", "type", "param", "code"}}; message and param are made valid UTF-8
// (invalid bytes become U+FFFD) so the body always serializes.
nlohmann::json OpenAiErrorBody(int http_status, std::string_view message,
                               std::optional<std::string> param, std::string_view code);
// Uses the ParamError's param when `error` is one.
nlohmann::json OpenAiErrorBody(const Error& error);

}  // namespace m3::net
