// The JSON pieces the whole and streamed Anthropic message share: the stop reason an output
// ended with, usage, a tool_use block's input object, and the SSE framing with event names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::anthropic {

using OJson = nlohmann::ordered_json;

// "end_turn", "max_tokens", "stop_sequence" (a stop string ended it) or "tool_use".
std::string_view StopReason(const text::OutputResult& result);
// The stop string that ended the output, else null.
OJson StopSequence(const text::OutputResult& result);

// {"input_tokens", "output_tokens"} (+ cache_read_input_tokens when some of the prompt came
// from the prefix cache; input_tokens then counts the rest, as Anthropic counts them).
OJson UsageJson(const openai::Usage& usage);

// A tool call's arguments (JSON object text) as the tool_use block's "input"; nullopt when
// they are not a JSON object.
std::optional<OJson> ToolInput(std::string_view arguments);

// True when `text` is empty or only whitespace: such text between blocks is layout, not a
// text block.
bool Blank(std::string_view text);

// "event: <name>\ndata: <json>\n\n"; invalid UTF-8 in the data becomes U+FFFD.
std::string SseEvent(std::string_view name, const OJson& data);

}  // namespace m3::anthropic
