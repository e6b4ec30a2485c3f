// Reading an API request body from an untrusted client: size and nesting depth are bounded
// before a JSON value is built, and malformed JSON is a 400 that says where the text broke.
#pragma once

#include <string_view>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/served_model.h"

namespace m3::openai {

// Throws RequestError: 413 for a body over limits.max_body_bytes, 400 for malformed JSON,
// nesting deeper than limits.max_json_depth, or a body that is not a JSON object.
Json ParseRequestBody(std::string_view body, const ApiLimits& limits);

}  // namespace m3::openai
