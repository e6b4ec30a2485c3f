// The JSON pieces chat and text completion responses share: usage, tool calls, and
// per-token logprobs in the chat format ({"content": [{token, logprob, bytes, top_logprobs}]}).
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/generation_output.h"
#include "gateway/text/tool_call_parser.h"
#include "gateway/tokenizer/tokenizer.h"

namespace m3::openai {

// {"prompt_tokens", "completion_tokens", "total_tokens"} (+ prompt_tokens_details.cached_tokens
// when some of the prompt came from the prefix cache).
nlohmann::ordered_json UsageJson(const Usage& usage);

// One OpenAI tool call: {"id", "type": "function", "function": {"name", "arguments"}}, with
// "index" first for stream deltas. A stream delta of a continuation piece (no id: see
// text::ToolCall) is {"index", "function": {"arguments": fragment}} alone.
nlohmann::ordered_json ToolCallJson(const text::ToolCall& call, bool with_index);

// Chat logprob entries, one per token; a token's text is its own decoding (special tokens
// included) and "bytes" its UTF-8 bytes.
nlohmann::ordered_json ChatLogprobEntries(const tok::Tokenizer& tokenizer,
                                          std::span<const TokenLogprob> tokens);

}  // namespace m3::openai
