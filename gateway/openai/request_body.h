// Reading an API request body from an untrusted client: the size is bounded before parsing and
// the structure (depth, keys, items, strings, values) while parsing, in time linear in the body;
// malformed JSON is a 400 that says where the text broke.
#pragma once

#include <functional>
#include <string_view>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/served_model.h"

namespace m3::openai {

// Throws RequestError: 413 for a body over limits.max_body_bytes or a structure over limits.json
// (code "json_too_large"); 400 for malformed JSON, nesting deeper than limits.json.max_depth,
// a number too large for a double (code "number_overflow", param naming the field), or a body
// that is not a JSON object. `cancelled` (optional) is asked every MiB of the body: a server
// passes "the client has left", and the parse then stops with a 503 nobody reads.
Json ParseRequestBody(std::string_view body, const ApiLimits& limits,
                      const std::function<bool()>& cancelled = {});

}  // namespace m3::openai
