// TextCompletion: the `/v1/completions` response from generated token ids, streamed (SSE
// `text_completion` chunks, a usage chunk when asked for, [DONE]) or whole (one
// `text_completion` body). Text passes through the streaming detokenizer and stop strings;
// there is no reasoning or tool-call parsing for raw completions. Logprobs use the legacy
// format (tokens, token_logprobs, top_logprobs, text_offset).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::openai {

class TextCompletion {
 public:
  // `tokenizer` must outlive this object.
  TextCompletion(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                 text::OutputParserOptions parser, bool include_usage, bool logprobs);

  // Streaming: the SSE events for these ids (none while text is withheld).
  std::vector<std::string> PushEvents(std::span<const int32_t> ids,
                                      std::span<const TokenLogprob> logprobs = {});
  // Streaming: the last text, the finish_reason chunk, the usage chunk, [DONE].
  std::vector<std::string> FinishEvents(text::FinishReason engine_reason, const Usage& usage);

  // Whole response: feed ids, then take the body.
  void Push(std::span<const int32_t> ids, std::span<const TokenLogprob> logprobs = {});
  nlohmann::ordered_json FinishBody(text::FinishReason engine_reason, const Usage& usage);

  bool output_finished() const { return parser_.finished(); }

 private:
  std::string Feed(std::span<const int32_t> ids, std::span<const TokenLogprob> logprobs);
  nlohmann::ordered_json Choice(std::string text, std::optional<text::FinishReason> finish);
  nlohmann::ordered_json Envelope(nlohmann::ordered_json choices) const;

  ResponseIdentity identity_;
  const tok::Tokenizer* tokenizer_;
  text::OutputParser parser_;
  bool include_usage_;
  bool logprobs_;
  std::vector<TokenLogprob> pending_logprobs_;
  size_t text_offset_ = 0;  // characters (bytes) of text already reported, for text_offset
  bool finished_ = false;
};

}  // namespace m3::openai
