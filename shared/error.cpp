// Names of error codes, for logs and error bodies.
#include "shared/error.h"

namespace m3 {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kUnprocessable:
      return "unprocessable";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kDataLoss:
      return "data_loss";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

int HttpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kPermissionDenied:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kTooLarge:
      return 413;
    case ErrorCode::kUnsupported:
      return 415;
    case ErrorCode::kUnprocessable:
    case ErrorCode::kDataLoss:
      return 422;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kDeadlineExceeded:
      return 504;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace m3
