// Bounded JSON request parsing (see request_json.h).
#include "gateway/net/request_json.h"

#include <string>

#include "gateway/net/api_error.h"

namespace m3::net {

int JsonNestingDepth(std::string_view text, int stop_after) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > stop_after) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json ParseRequestJson(std::string_view text, int max_depth) {
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    throw ParamError(ErrorCode::kInvalidArgument,
                     "the request body is nested more than " + std::to_string(max_depth) +
                         " arrays/objects deep",
                     "");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // A parse_error ("[json.exception.parse_error.101] parse error at line 1, column 5: ...")
    // or an out_of_range for a number that does not fit ("number overflow parsing '1e999'").
    std::string detail = e.what();
    if (const size_t at = detail.find("] "); at != std::string::npos)
      detail = detail.substr(at + 2);
    throw ParamError(ErrorCode::kInvalidArgument,
                     "the request body is not valid JSON: " + detail.substr(0, 300), "");
  }
}

}  // namespace m3::net
