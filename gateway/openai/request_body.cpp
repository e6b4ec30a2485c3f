// Bounded JSON body parsing (see request_body.h).
#include "gateway/openai/request_body.h"

#include <string>

#include "shared/bounded_json.h"

namespace m3::openai {

Json ParseRequestBody(std::string_view body, const ApiLimits& limits,
                      const std::function<bool()>& cancelled) {
  if (body.size() > limits.max_body_bytes) {
    throw RequestError(ErrorCode::kTooLarge,
                       "request body is " + std::to_string(body.size()) +
                           " bytes, over the limit of " + std::to_string(limits.max_body_bytes),
                       "", "payload_too_large");
  }
  Json j;
  try {
    JsonLimits json_limits = limits.json;
    if (json_limits.max_tree_bytes == 0) json_limits.max_tree_bytes = TreeBytesFor(body.size());
    j = ParseBoundedOrderedJson(body, json_limits, cancelled);
  } catch (const JsonBodyError& e) {
    throw RequestError(e.code(), e.what(), e.field(),
                       e.slug() == "json_too_deep" ? "invalid_json" : e.slug());
  }
  if (!j.is_object()) {
    throw RequestError(ErrorCode::kInvalidArgument,
                       "request body must be a JSON object, got " + std::string(JsonTypeName(j)),
                       "", "invalid_type");
  }
  return j;
}

}  // namespace m3::openai
