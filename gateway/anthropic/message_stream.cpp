// Anthropic message SSE events (see message_stream.h).
#include "gateway/anthropic/message_stream.h"

#include <utility>

namespace m3::anthropic {

MessageStream::MessageStream(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
                             text::OutputParserOptions parser, int64_t input_tokens)
    : identity_(std::move(identity)),
      parser_(tokenizer, std::move(parser)),
      input_tokens_(input_tokens) {}

std::vector<std::string> MessageStream::Start() {
  const OJson message = {{"id", identity_.id},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", identity_.model},
                         {"content", OJson::array()},
                         {"stop_reason", nullptr},
                         {"stop_sequence", nullptr},
                         {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
  return {SseEvent("message_start", {{"type", "message_start"}, {"message", message}}),
          SseEvent("ping", {{"type", "ping"}})};
}

void MessageStream::Open(Block type, OJson block, std::vector<std::string>& out) {
  Close(out);
  open_ = type;
  ++index_;
  out.push_back(SseEvent(
      "content_block_start",
      {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}}));
}

void MessageStream::Close(std::vector<std::string>& out) {
  if (open_ == Block::kNone) return;
  open_ = Block::kNone;
  out.push_back(
      SseEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}));
}

void MessageStream::Delta(OJson delta, std::vector<std::string>& out) {
  out.push_back(
      SseEvent("content_block_delta",
               {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}}));
}

void MessageStream::Emit(const text::OutputDelta& d, std::vector<std::string>& out) {
  if (!d.reasoning_content.empty()) {
    if (open_ != Block::kThinking) {
      pending_blank_.clear();
      Open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
    }
    Delta({{"type", "thinking_delta"}, {"thinking", d.reasoning_content}}, out);
  }
  if (!d.content.empty()) {
    if (open_ == Block::kText) {
      Delta({{"type", "text_delta"}, {"text", d.content}}, out);
    } else {
      pending_blank_ += d.content;
      if (!Blank(pending_blank_)) {
        Open(Block::kText, {{"type", "text"}, {"text", ""}}, out);
        Delta({{"type", "text_delta"}, {"text", std::move(pending_blank_)}}, out);
        pending_blank_.clear();
      }
    }
  }
  for (const text::ToolCall& piece : d.tool_calls) {
    if (!piece.id.empty()) {
      pending_blank_.clear();
      Open(Block::kToolUse,
           {{"type", "tool_use"},
            {"id", piece.id},
            {"name", piece.name},
            {"input", OJson::object()}},
           out);
      open_call_ = piece.index;
    } else if (open_ != Block::kToolUse || piece.index != open_call_) {
      continue;  // a fragment of no open call: the parser starts every call with its id
    }
    if (!piece.arguments.empty()) {
      Delta({{"type", "input_json_delta"}, {"partial_json", piece.arguments}}, out);
    }
  }
}

std::vector<std::string> MessageStream::Push(std::span<const int32_t> ids) {
  std::vector<std::string> out;
  if (finished_ || parser_.finished()) return out;
  Emit(parser_.Step(ids), out);
  return out;
}

std::vector<std::string> MessageStream::Finish(text::FinishReason engine_reason,
                                               const openai::Usage& usage) {
  std::vector<std::string> out;
  if (finished_) return out;
  finished_ = true;
  Emit(parser_.Finish(engine_reason), out);
  Close(out);
  const text::OutputResult& r = parser_.result();
  out.push_back(
      SseEvent("message_delta",
               {{"type", "message_delta"},
                {"delta", {{"stop_reason", StopReason(r)}, {"stop_sequence", StopSequence(r)}}},
                {"usage", UsageJson(usage)}}));
  out.push_back(SseEvent("message_stop", {{"type", "message_stop"}}));
  return out;
}

}  // namespace m3::anthropic
