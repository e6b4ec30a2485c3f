// Bounded JSON request parsing (see request_json.h).
#include "gateway/net/request_json.h"

#include <string>

#include "gateway/net/api_error.h"
#include "shared/bounded_json.h"

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
  JsonLimits limits;
  limits.max_depth = max_depth;
  limits.max_tree_bytes = TreeBytesFor(text.size());
  try {
    return ParseBoundedJson(text, limits);
  } catch (const JsonBodyError& e) {
    if (e.slug() == "json_too_deep") {
      throw ParamError(ErrorCode::kInvalidArgument,
                       "the request body is nested more than " + std::to_string(max_depth) +
                           " arrays/objects deep",
                       "");
    }
    if (e.slug() == "invalid_json") {
      std::string detail = e.what();
      const std::string prefix = "request body is not valid JSON: ";
      if (detail.rfind(prefix, 0) == 0) detail = detail.substr(prefix.size());
      throw ParamError(ErrorCode::kInvalidArgument, "the request body is not valid JSON: " + detail,
                       "");
    }
    throw ParamError(e.code(), e.what(), e.field());
  }
}

}  // namespace m3::net
