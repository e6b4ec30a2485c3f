// Parsing of JSON request bodies from untrusted clients: nesting depth is bounded as the
// parser reads (a body of 100k '[' would otherwise cost deep recursion wherever the
// value is later walked, printed or destroyed), and malformed JSON is an invalid-request error
// that says where the text went wrong.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace m3::net {

// Requests need far less: a chat message is about 5 levels deep.
inline constexpr int kMaxRequestJsonDepth = 64;

// Parses with shared/bounded_json.h's limits (linear time, structure bounded while parsing).
// Throws ParamError: kInvalidArgument (param "") for malformed JSON, JSON nested deeper than
// `max_depth` arrays/objects, or trailing data; kInvalidArgument naming the field for a number
// too large for a double; kTooLarge for a structure over the limits.
nlohmann::json ParseRequestJson(std::string_view text, int max_depth = kMaxRequestJsonDepth);

// The deepest array/object nesting in `text` (strings skipped), stopping early once it
// exceeds `stop_after`. Malformed text gives a best-effort count; the parser reports it.
int JsonNestingDepth(std::string_view text, int stop_after);

}  // namespace m3::net
