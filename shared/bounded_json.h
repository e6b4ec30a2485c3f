// Parsing JSON from an untrusted client in time and memory linear in its size, with the
// structural limits (depth, keys per object, items per array, string bytes, total values)
// applied while the text is read, so a hostile body is refused at the first value over a limit
// rather than after the whole tree is built. A number too large for a double is an error that
// names the field it was in. The text is read by shared/json_text_reader.h (~1 GB/s, errors
// that quote a few bytes, no recursion), and the parse can be cancelled.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace m3 {

// Defaults sized from the largest legal request, with headroom. The longest context is 524,288
// tokens (max_position_embeddings), so a prompt of token ids is the longest legal array; a whole
// request is that prompt plus messages (up to 4096, ~10 values each) and tools (up to 512 JSON
// schemas), well under 2M values. Keys per object: tool schemas and template kwargs have tens
// to hundreds; logit_bias (one key per token) is refused anyway. A single string may be a data:
// URI as large as the body itself, so its bound is the body's.
struct JsonLimits {
  int max_depth = 64;                        // a chat message is ~5 levels deep
  size_t max_object_keys = size_t{1} << 14;  // 16,384
  size_t max_array_items = size_t{1} << 20;  // 1,048,576: twice the longest context
  size_t max_key_bytes = size_t{4} << 10;    // a property name, not data
  size_t max_string_bytes = size_t{64} << 20;
  size_t max_values = size_t{1} << 21;  // 2,097,152 values of any kind in the whole body
  // The parsed tree's memory, estimated as it grows (each value's node, each object member's key
  // and slot, each string's bytes); 0: unbounded. A body of many small objects expands ~6x in
  // memory, so a server that reserves a multiple of the body size per request bounds the tree
  // with TreeBytesFor: the reservation then covers what parsing allocates.
  size_t max_tree_bytes = 0;
};

// The tree bound for a body of `body_bytes`: twice the body (with the body itself, within the
// 3x a server reserves per request), at least 64 MiB (a prompt of short token ids, "1,", expands
// 8x; its largest legal size stays well under this floor).
inline size_t TreeBytesFor(size_t body_bytes) {
  return body_bytes * 2 > (size_t{64} << 20) ? body_bytes * 2 : size_t{64} << 20;
}

// Why a body was refused. code(): kInvalidArgument for malformed JSON, nesting over the depth
// limit, a number that overflows a double or a number literal over 1,024 characters;
// kTooLarge for a count or size over its limit; kUnavailable when the parse was cancelled.
// field(): where in the body it happened ("temperature", "messages[3].content[0].text"), empty
// for the top level, when no field had been read yet, and for malformed JSON or nesting.
class JsonBodyError : public Error {
 public:
  JsonBodyError(ErrorCode code, const std::string& message, std::string field, std::string slug)
      : Error(code, message), field_(std::move(field)), slug_(std::move(slug)) {}
  const std::string& field() const { return field_; }
  // A short machine-readable name: "invalid_json", "json_too_deep", "json_too_large",
  // "number_overflow", "number_too_long", "cancelled".
  const std::string& slug() const { return slug_; }

 private:
  std::string field_;
  std::string slug_;
};

// Parses one JSON value (trailing data is an error). Throws JsonBodyError. `cancelled`
// (optional) is asked every MiB of text (shared/json_text_reader.h); when it says yes the parse
// stops with code kUnavailable, slug "cancelled" (a server passes "the client has left").
nlohmann::json ParseBoundedJson(std::string_view text, const JsonLimits& limits = {},
                                const std::function<bool()>& cancelled = {});
// The same, keeping the order of object keys (the API layer's Json: a tool schema's properties
// render into the prompt in the client's order).
nlohmann::ordered_json ParseBoundedOrderedJson(std::string_view text, const JsonLimits& limits = {},
                                               const std::function<bool()>& cancelled = {});

}  // namespace m3
