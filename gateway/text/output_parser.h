// OutputParser: the per-request chain from generated token ids to OpenAI response pieces:
// streaming detokenizer -> stop strings / stop tokens -> reasoning split -> tool calls (the
// syntax of tool_format: M2 or M3) -> hiding the special-token text the parsers leave. Each
// step returns a delta {content, reasoning_content, tool_calls} for streaming responses; the
// accumulated result serves non-streaming responses.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/text/reasoning_parser.h"
#include "gateway/text/special_text_filter.h"
#include "gateway/text/stop_matcher.h"
#include "gateway/text/streaming_detokenizer.h"
#include "gateway/text/tool_call_parser.h"
#include "gateway/text/tool_call_stream.h"
#include "gateway/tokenizer/tokenizer.h"

namespace m3::text {

enum class FinishReason { kStop, kLength, kToolCalls, kAbort };
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", "tool_calls", "abort"

struct OutputParserOptions {
  bool skip_special_tokens = true;
  StopOptions stop;
  bool parse_reasoning = true;
  ReasoningOptions reasoning;
  bool parse_tool_calls = false;  // on when the request has tools (and tool_choice is not "none")
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // for parameter types
  ToolCallFormat tool_format;                     // the syntax (M2 or M3) and its markers
  ToolCallParser::IdGenerator make_tool_call_id;  // default: random call_ ids
  // With skip_special_tokens: the special tokens kept for the parsers (think tags, tool-call
  // markers) that the parsers leave in the output (a stray end tag, a malformed call's
  // markers) are removed from content and reasoning, so no special-token text reaches the
  // user. ApplyChatFormat (chat_format.h) turns it on.
  bool hide_kept_special_tokens = false;
};

struct OutputDelta {
  std::string content;
  std::string reasoning_content;
  // Tool calls, or pieces of them while their arguments stream (see ToolCall): a piece with an
  // id starts call `index`, the arguments of its pieces concatenate.
  std::vector<ToolCall> tool_calls;
  std::optional<FinishReason> finish_reason;  // set on the last delta
  bool empty() const {
    return content.empty() && reasoning_content.empty() && tool_calls.empty() && !finish_reason;
  }
};

struct OutputResult {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;  // whole calls (the pieces of the deltas joined)
  std::optional<FinishReason> finish_reason;
  std::optional<std::string> stop_string;  // which stop string ended the output
  std::optional<int32_t> stop_token_id;    // or which stop token
  size_t num_tokens = 0;                   // tokens fed, the stop token included
};

class OutputParser {
 public:
  // `tokenizer` must outlive the parser. Throws m3::Error(kInvalidArgument) for bad options.
  OutputParser(const tok::Tokenizer& tokenizer, OutputParserOptions options);

  // Feeds generated ids. After the output has finished (a stop string or stop token), further
  // ids are ignored.
  OutputDelta Step(int32_t id);
  OutputDelta Step(std::span<const int32_t> ids);

  // The engine ended generation (kLength: max_tokens, kAbort: cancelled, kStop: the engine's
  // own stop condition): releases everything withheld. Does nothing once finished.
  OutputDelta Finish(FinishReason reason);

  bool finished() const { return result_.finish_reason.has_value(); }
  const OutputResult& result() const { return result_; }

 private:
  OutputDelta Downstream(std::string text, bool final);
  OutputDelta Close(std::string text, FinishReason reason);

  OutputParserOptions options_;
  StreamingDetokenizer detokenizer_;
  StopMatcher stop_;
  ReasoningParser reasoning_;
  std::unique_ptr<ToolCallStreamParser> tools_;
  SpecialTextFilter content_filter_;
  SpecialTextFilter reasoning_filter_;
  OutputResult result_;
};

}  // namespace m3::text
