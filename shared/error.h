// m3::Error: the one exception type of the project. It carries a status code so every
// front end (CLI exit, HTTP status, gRPC status) can map the same failure the same way.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace m3 {

enum class ErrorCode {
  kInvalidArgument,    // the caller sent something malformed (HTTP 400, gRPC INVALID_ARGUMENT)
  kNotFound,           // a named file, tensor or resource does not exist (404 / NOT_FOUND)
  kTooLarge,           // input over a configured limit (413 / RESOURCE_EXHAUSTED)
  kUnsupported,        // understood but not supported: media type, tokenizer component (415)
  kUnprocessable,      // well formed but semantically wrong: placeholder count mismatch (422)
  kResourceExhausted,  // queue full, out of memory budget (429 / RESOURCE_EXHAUSTED)
  kDataLoss,           // corrupt or truncated file (e.g. a safetensors header past end of file)
  kUnavailable,        // a dependency could not be reached (502/503 / UNAVAILABLE)
  kDeadlineExceeded,   // a timeout (504 / DEADLINE_EXCEEDED)
  kPermissionDenied,   // refused by policy, e.g. the SSRF guard (403 / PERMISSION_DENIED)
  kInternal,           // a bug: an invariant of our own code broke (500 / INTERNAL)
};

std::string_view ErrorCodeName(ErrorCode code);
// The HTTP status of a failure of this kind (kUnavailable: 503; a front end where it means the
// client's own URL could not be fetched answers 400 instead).
int HttpStatusOf(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, message) unless `ok`; keeps call sites one line long.
inline void Require(bool ok, ErrorCode code, const std::string& message) {
  if (!ok) throw Error(code, message);
}

}  // namespace m3
