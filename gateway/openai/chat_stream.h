// ChatStream: the SSE event sequence of a streamed chat completion, from generated token ids:
// a first chunk with the assistant role, then one chunk per step that produced output
// (content, reasoning_content, or tool_calls deltas: MiniMax tool-call XML becomes OpenAI
// tool calls), a chunk with the finish_reason, a usage chunk when stream_options asked for
// it, and "data: [DONE]". Text passes through the OutputParser chain (streaming detokenizer,
// stop strings, reasoning split, tool calls).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::openai {

class ChatStream {
 public:
  // `tokenizer` must outlive the stream.
  ChatStream(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
             text::OutputParserOptions parser, bool include_usage, bool logprobs);

  std::vector<std::string> Start();  // the role chunk
  // Generated ids and, when logprobs were asked for, one entry per id. Logprobs of ids whose
  // text is still withheld ride on the next chunk.
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const TokenLogprob> logprobs = {});
  // The engine finished (or the output did: a stop string); `usage` from the engine.
  std::vector<std::string> Finish(text::FinishReason engine_reason, const Usage& usage);

  // The output ended on its own (a stop string or stop token): the engine can be aborted.
  bool output_finished() const { return parser_.finished(); }
  const text::OutputResult& result() const { return parser_.result(); }

 private:
  nlohmann::ordered_json Chunk(nlohmann::ordered_json delta,
                               std::optional<text::FinishReason> finish);
  void Emit(text::OutputDelta delta, std::vector<std::string>& out);

  ResponseIdentity identity_;
  const tok::Tokenizer* tokenizer_;
  text::OutputParser parser_;
  bool include_usage_;
  bool logprobs_;
  std::vector<TokenLogprob> pending_logprobs_;
  bool finished_ = false;
};

}  // namespace m3::openai
