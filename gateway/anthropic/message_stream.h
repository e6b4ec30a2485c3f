// MessageStream: the SSE event sequence of a streamed Anthropic message, from generated token
// ids through the OutputParser chain: message_start and a ping; then for each output channel
// in the order it arrives a content block (content_block_start, deltas, content_block_stop):
// thinking (thinking_delta), text (text_delta; whitespace alone opens no block) and one
// tool_use block per call, opened as soon as the parser knows its id and name, its argument
// JSON streamed as input_json_delta fragments as the parser completes them; at the end
// message_delta with stop_reason, stop_sequence and usage, and message_stop.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway/anthropic/message_json.h"
#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::anthropic {

class MessageStream {
 public:
  // `tokenizer` must outlive the stream; `input_tokens`: the prompt's length, for
  // message_start (the final count comes with message_delta).
  MessageStream(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
                text::OutputParserOptions parser, int64_t input_tokens);

  std::vector<std::string> Start();  // message_start, ping
  std::vector<std::string> Push(std::span<const int32_t> ids);
  // The engine finished (or the output did); `usage` from the engine.
  std::vector<std::string> Finish(text::FinishReason engine_reason, const openai::Usage& usage);
  // The events of one parser delta (Push and Finish feed theirs here; tests feed scripted ones).
  void Emit(const text::OutputDelta& delta, std::vector<std::string>& out);

  bool output_finished() const { return parser_.finished(); }
  const text::OutputResult& result() const { return parser_.result(); }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  void Open(Block type, OJson block, std::vector<std::string>& out);
  void Close(std::vector<std::string>& out);
  void Delta(OJson delta, std::vector<std::string>& out);

  openai::ResponseIdentity identity_;
  text::OutputParser parser_;
  int64_t input_tokens_;
  Block open_ = Block::kNone;
  int index_ = -1;             // the open block's index (-1 before the first)
  size_t open_call_ = 0;       // the parser's index of the call whose block is open
  std::string pending_blank_;  // whitespace not yet in a text block
  bool finished_ = false;
};

}  // namespace m3::anthropic
