// The non-streaming Anthropic message (see message_body.h).
#include "gateway/anthropic/message_body.h"

#include <utility>

namespace m3::anthropic {

OJson ContentBlocks(const text::OutputResult& r) {
  OJson blocks = OJson::array();
  if (!r.reasoning_content.empty()) {
    // No signature: this server does not sign its reasoning; clients send the block back as is.
    blocks.push_back({{"type", "thinking"}, {"thinking", r.reasoning_content}, {"signature", ""}});
  }
  if (!Blank(r.content)) blocks.push_back({{"type", "text"}, {"text", r.content}});
  for (const text::ToolCall& call : r.tool_calls) {
    if (std::optional<OJson> input = ToolInput(call.arguments)) {
      blocks.push_back({{"type", "tool_use"},
                        {"id", call.id},
                        {"name", call.name},
                        {"input", std::move(*input)}});
    } else {
      blocks.push_back({{"type", "text"}, {"text", call.arguments}});
    }
  }
  return blocks;
}

MessageBody::MessageBody(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
                         text::OutputParserOptions parser)
    : identity_(std::move(identity)), parser_(tokenizer, std::move(parser)) {}

void MessageBody::Push(std::span<const int32_t> ids) {
  parser_.Step(ids);
}

OJson MessageBody::Finish(text::FinishReason engine_reason, const openai::Usage& usage) {
  parser_.Finish(engine_reason);
  const text::OutputResult& r = parser_.result();
  return {{"id", identity_.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", identity_.model},
          {"content", ContentBlocks(r)},
          {"stop_reason", StopReason(r)},
          {"stop_sequence", StopSequence(r)},
          {"usage", UsageJson(usage)}};
}

}  // namespace m3::anthropic
