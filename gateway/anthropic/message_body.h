// MessageBody: the non-streaming Anthropic message, accumulated from generated token ids
// through the same OutputParser chain as the OpenAI path: {id, type: "message", role, model,
// content: [thinking, text, tool_use blocks], stop_reason, stop_sequence, usage}.
#pragma once

#include <span>

#include "gateway/anthropic/message_json.h"
#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::anthropic {

class MessageBody {
 public:
  // `tokenizer` must outlive this object. identity.created is not part of the message.
  MessageBody(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
              text::OutputParserOptions parser);

  void Push(std::span<const int32_t> ids);
  // The message once the engine has finished.
  OJson Finish(text::FinishReason engine_reason, const openai::Usage& usage);

  bool output_finished() const { return parser_.finished(); }

 private:
  openai::ResponseIdentity identity_;
  text::OutputParser parser_;
};

// The blocks of a whole output, in the order the model writes them: thinking, text, tool_use
// (a call whose arguments are not a JSON object is kept as text rather than lost).
OJson ContentBlocks(const text::OutputResult& result);

}  // namespace m3::anthropic
