// Shared Anthropic message JSON (see message_json.h).
#include "gateway/anthropic/message_json.h"

#include <algorithm>

namespace m3::anthropic {

std::string_view StopReason(const text::OutputResult& r) {
  if (!r.finish_reason) return "end_turn";
  switch (*r.finish_reason) {
    case text::FinishReason::kLength:
      return "max_tokens";
    case text::FinishReason::kToolCalls:
      return "tool_use";
    case text::FinishReason::kStop:
      return r.stop_string ? "stop_sequence" : "end_turn";
    case text::FinishReason::kAbort:
      break;
  }
  return "end_turn";
}

OJson StopSequence(const text::OutputResult& r) {
  if (r.finish_reason == text::FinishReason::kStop && r.stop_string) return *r.stop_string;
  return nullptr;
}

OJson UsageJson(const openai::Usage& usage) {
  OJson u = {{"input_tokens", usage.prompt_tokens - usage.cached_prompt_tokens},
             {"output_tokens", usage.completion_tokens}};
  if (usage.cached_prompt_tokens > 0) {
    u["cache_read_input_tokens"] = usage.cached_prompt_tokens;
  }
  return u;
}

std::optional<OJson> ToolInput(std::string_view arguments) {
  OJson input = OJson::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) return std::nullopt;
  return input;
}

bool Blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; });
}

std::string SseEvent(std::string_view name, const OJson& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += data.dump(-1, ' ', false, OJson::error_handler_t::replace);
  out += "\n\n";
  return out;
}

}  // namespace m3::anthropic
