// The Anthropic Messages response as an openai::ResponseFormatter, so the generation machinery
// the OpenAI path uses (GenerationResponder, the exchange sink, token timing) serves it
// unchanged: MessageStream's events or MessageBody's message, and failures in Anthropic's
// error shape (an "error" event once the stream has started).
#pragma once

#include <cstdint>
#include <memory>

#include "gateway/openai/generation_output.h"
#include "gateway/openai/response_formatter.h"
#include "gateway/text/output_parser.h"

namespace m3::anthropic {

// `tokenizer` must outlive the formatter; `input_tokens`: the prompt's length (message_start).
std::unique_ptr<openai::ResponseFormatter> MakeMessageFormatter(const tok::Tokenizer& tokenizer,
                                                                openai::ResponseIdentity identity,
                                                                text::OutputParserOptions options,
                                                                bool stream, int64_t input_tokens);

}  // namespace m3::anthropic
