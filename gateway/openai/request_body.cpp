// Bounded JSON body parsing (see request_body.h).
#include "gateway/openai/request_body.h"

#include <string>

namespace m3::openai {

Json ParseRequestBody(std::string_view body, const ApiLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    throw RequestError(ErrorCode::kTooLarge,
                       "request body is " + std::to_string(body.size()) +
                           " bytes, over the limit of " + std::to_string(limits.max_body_bytes),
                       "", "payload_too_large");
  }
  // The parser callback sees each container open at its depth, so a deeply nested body is
  // refused as soon as the limit is crossed rather than after building it.
  const int max_depth = limits.max_json_depth;
  Json::parser_callback_t cb = [&](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw RequestError(
          ErrorCode::kInvalidArgument,
          "request body nests JSON deeper than " + std::to_string(max_depth) + " levels", "",
          "invalid_json");
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(body.begin(), body.end(), cb);
  } catch (const Json::parse_error& e) {
    throw RequestError(ErrorCode::kInvalidArgument,
                       std::string("request body is not valid JSON: ") + e.what(), "",
                       "invalid_json");
  }
  if (!j.is_object()) {
    throw RequestError(ErrorCode::kInvalidArgument,
                       "request body must be a JSON object, got " + std::string(JsonTypeName(j)),
                       "", "invalid_type");
  }
  return j;
}

}  // namespace m3::openai
