// SSE framing (see sse.h).
#include "gateway/openai/sse.h"

namespace m3::openai {

std::string SseEvent(const nlohmann::ordered_json& chunk) {
  return "data: " + chunk.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
         "\n\n";
}

std::string SseDone() {
  return "data: [DONE]\n\n";
}

std::string SseError(const nlohmann::json& error_body) {
  return "data: " + error_body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n\n";
}

}  // namespace m3::openai
