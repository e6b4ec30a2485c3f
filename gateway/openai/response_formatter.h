// ResponseFormatter: what a generation session needs from a response builder whatever the
// endpoint (chat completions or text completions), streamed (SSE events) or whole (one body),
// so the engine-facing code is written once.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::openai {

class ResponseFormatter {
 public:
  virtual ~ResponseFormatter() = default;
  virtual bool streaming() const = 0;
  // Streaming: the events that open the response (the chat role chunk; none for completions).
  virtual std::vector<std::string> Start() = 0;
  // Streaming: the events for these ids; whole: accumulates and returns none.
  virtual std::vector<std::string> Push(std::span<const int32_t> ids,
                                        std::span<const TokenLogprob> logprobs) = 0;
  // Streaming: the closing events ([DONE] last); whole: one element, the body JSON.
  virtual std::vector<std::string> Finish(text::FinishReason engine_reason, const Usage& usage) = 0;
  // The output ended on its own (stop string or stop token).
  virtual bool output_finished() const = 0;

  // A generation that failed, in the API's own error shape: the body of the error response
  // when nothing was written yet, and the events that end a stream already started. `code` is
  // the OpenAI error code slug. Default: the OpenAI error object; an SSE event holding it, then
  // [DONE].
  virtual std::string ErrorBody(int http_status, std::string_view message,
                                std::string_view code) const;
  virtual std::vector<std::string> StreamErrorEvents(int http_status, std::string_view message,
                                                     std::string_view code) const;
};

// `tokenizer` must outlive the formatter.
std::unique_ptr<ResponseFormatter> MakeChatFormatter(const tok::Tokenizer& tokenizer,
                                                     ResponseIdentity identity,
                                                     text::OutputParserOptions options, bool stream,
                                                     bool include_usage, bool logprobs);
std::unique_ptr<ResponseFormatter> MakeCompletionFormatter(const tok::Tokenizer& tokenizer,
                                                           ResponseIdentity identity,
                                                           text::OutputParserOptions options,
                                                           bool stream, bool include_usage,
                                                           bool logprobs);

}  // namespace m3::openai
