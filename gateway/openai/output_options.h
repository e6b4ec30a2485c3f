// How a request's generated text is parsed: the OutputParser options for a chat or text
// completion (stop strings and stop tokens, the model's end-of-sequence ids, the model's
// reasoning and tool-call format with where the prompt left the reasoning, tool-call parsing
// when the request has tools).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/output_parser.h"

namespace m3::openai {

// True when the rendered prompt ends inside an open <think> block (MiniMax templates open it in
// the generation prompt), so the first output is reasoning.
bool PromptOpensReasoning(std::string_view rendered_prompt, std::string_view start_tag = "<think>");

// `eos_token_ids`: the model's end-of-sequence ids (generation_config.json / config.json);
// `format`: the reasoning and tool-call syntax the served model speaks (text/chat_format.h).
text::OutputParserOptions ChatOutputOptions(const ChatRequest& request,
                                            std::span<const int64_t> eos_token_ids,
                                            std::string_view rendered_prompt,
                                            const text::ChatFormat& format);
text::OutputParserOptions CompletionOutputOptions(const CompletionRequest& request,
                                                  std::span<const int64_t> eos_token_ids);

}  // namespace m3::openai
