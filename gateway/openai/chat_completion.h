// ChatCompletion: the non-streaming `chat.completion` response, accumulated from generated
// token ids through the same OutputParser chain as streaming: message content,
// reasoning_content, tool_calls (from MiniMax tool-call XML), finish_reason, logprobs, usage.
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::openai {

class ChatCompletion {
 public:
  // `tokenizer` must outlive this object.
  ChatCompletion(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                 text::OutputParserOptions parser, bool logprobs);

  void Push(std::span<const int32_t> ids, std::span<const TokenLogprob> logprobs = {});
  // The response body once the engine has finished.
  nlohmann::ordered_json Finish(text::FinishReason engine_reason, const Usage& usage);

  bool output_finished() const { return parser_.finished(); }

 private:
  ResponseIdentity identity_;
  const tok::Tokenizer* tokenizer_;
  text::OutputParser parser_;
  bool logprobs_;
  std::vector<TokenLogprob> logprob_tokens_;
};

}  // namespace m3::openai
