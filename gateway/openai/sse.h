// Server-sent events framing for streamed responses: one "data: <json>\n\n" event per chunk,
// ending with "data: [DONE]\n\n" as OpenAI clients expect.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace m3::openai {

// Invalid UTF-8 in the chunk (a model can emit any bytes) becomes U+FFFD.
std::string SseEvent(const nlohmann::ordered_json& chunk);
std::string SseDone();

}  // namespace m3::openai
