// Error mapping for the HTTP and gRPC front ends (see api_error.h).
#include "gateway/net/api_error.h"

#include <cstdint>
#include <string>

#include "gateway/unicode/utf8.h"

namespace m3::net {

std::exception_ptr NameParam(std::exception_ptr error, const std::string& param) {
  try {
    std::rethrow_exception(error);
  } catch (const ParamError&) {
    return error;
  } catch (const Error& e) {
    return std::make_exception_ptr(ParamError(e.code(), param + ": " + e.what(), param));
  } catch (...) {
    return error;
  }
}

int HttpStatusFor(ErrorCode code) {
  // In the media path kUnavailable is a URL the client sent that cannot be fetched (connection
  // refused, DNS failure, TLS failure, the origin's 5xx): the client's input, as OpenAI and vLLM
  // answer an image URL they cannot download. Engines' unavailability never maps here
  // (openai::RequestError carries its own 503).
  return code == ErrorCode::kUnavailable ? 400 : HttpStatusOf(code);
}

std::string_view ErrorCodeSlug(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_request";
    case ErrorCode::kPermissionDenied:
      return "media_url_refused";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kTooLarge:
      return "payload_too_large";
    case ErrorCode::kUnsupported:
      return "unsupported_media_type";
    case ErrorCode::kUnprocessable:
      return "unprocessable_media";
    case ErrorCode::kDataLoss:
      return "corrupt_media";
    case ErrorCode::kResourceExhausted:
      return "server_busy";
    case ErrorCode::kUnavailable:
      return "media_fetch_failed";
    case ErrorCode::kDeadlineExceeded:
      return "media_fetch_timeout";
    case ErrorCode::kInternal:
      return "internal_error";
  }
  return "internal_error";
}

int GrpcStatusCodeFor(ErrorCode code) {
  // Values of grpc::StatusCode, kept numeric so this file needs no gRPC headers.
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 3;  // INVALID_ARGUMENT
    case ErrorCode::kPermissionDenied:
      return 3;  // INVALID_ARGUMENT, like HTTP 400
    case ErrorCode::kNotFound:
      return 5;  // NOT_FOUND
    case ErrorCode::kTooLarge:
      return 8;  // RESOURCE_EXHAUSTED
    case ErrorCode::kUnsupported:
      return 3;  // INVALID_ARGUMENT
    case ErrorCode::kUnprocessable:
      return 3;  // INVALID_ARGUMENT
    case ErrorCode::kDataLoss:
      return 3;  // INVALID_ARGUMENT: the caller's data
    case ErrorCode::kResourceExhausted:
      return 8;  // RESOURCE_EXHAUSTED
    case ErrorCode::kUnavailable:
      return 3;  // INVALID_ARGUMENT: a media URL that cannot be fetched, like HTTP 400
    case ErrorCode::kDeadlineExceeded:
      return 4;  // DEADLINE_EXCEEDED
    case ErrorCode::kInternal:
      return 13;  // INTERNAL
  }
  return 13;
}

namespace {

// Messages quote client bytes (an HTTP target, a data: URI's media type), and nlohmann's dump()
// throws on invalid UTF-8, which would turn a 404 into a 500.
std::string ValidUtf8(std::string_view s) {
  return unicode::IsValidUtf8(s) ? std::string(s) : unicode::RepairUtf8(s);
}

}  // namespace

nlohmann::json OpenAiErrorBody(int http_status, std::string_view message,
                               std::optional<std::string> param, std::string_view code) {
  // 429 (server_busy: a queue or the body-memory budget is full) is no malformed request: OpenAI's
  // error guide documents 429 as rate limiting (code rate_limit_exceeded) and its SDKs raise it as
  // RateLimitError, so it takes the type of the API's other 429s (openai/request_error.cpp).
  std::string_view type = http_status >= 500   ? "server_error"
                          : http_status == 429 ? "rate_limit_error"
                                               : "invalid_request_error";
  nlohmann::json error = {{"message", ValidUtf8(message)}, {"type", type}, {"code", code}};
  error["param"] =
      param && !param->empty() ? nlohmann::json(ValidUtf8(*param)) : nlohmann::json(nullptr);
  return {{"error", error}};
}

nlohmann::json OpenAiErrorBody(const Error& error) {
  int status = HttpStatusFor(error.code());
  std::optional<std::string> param;
  if (const auto* p = dynamic_cast<const ParamError*>(&error)) param = p->param();
  return OpenAiErrorBody(status, error.what(), std::move(param), ErrorCodeSlug(error.code()));
}

}  // namespace m3::net
