// Server-sent events framing for streamed responses: one "data: <json>\n\n" event per chunk,
// ending with "data: [DONE]\n\n" as OpenAI clients expect.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace m3::openai {

// Invalid UTF-8 in the chunk (a model can emit any bytes) becomes U+FFFD.
std::string SseEvent(const nlohmann::ordered_json& chunk);
std::string SseDone();
// A failure after the stream has started (the status line is already sent): an event holding
// the OpenAI error object, as OpenAI-compatible servers send it; [DONE] follows.
std::string SseError(const nlohmann::json& error_body);

}  // namespace m3::openai
