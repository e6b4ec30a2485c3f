// OutputReplayer: a model's output text run offline through the output chain a chat request
// gets on the server: the text tokenized with the model's tokenizer (special tokens
// recognized), the ids fed to the streaming detokenizer and OutputParser configured for the
// model's chat format and the request (its tools, and the prompt rendered with the model's
// template to decide where reasoning starts), all at once or N tokens at a time with the deltas
// accumulated. What `m3-gateway parse-output` prints; the tests use it to check that parsing
// inverts the chat template.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/text/chat_format.h"
#include "gateway/text/output_parser.h"
#include "gateway/text/prompt_builder.h"

namespace m3::text {

struct ReplayResult {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;  // whole calls, joined from the streamed pieces by index
  FinishReason finish_reason = FinishReason::kStop;
  size_t num_tokens = 0;  // ids fed (up to and including a stop token)
  size_t num_deltas = 0;  // Step calls that returned something
};

class OutputReplayer {
 public:
  // The tokenizer, chat template and end-of-sequence ids of `model_dir`; the parsers named as
  // the serve flags name them ("auto": from the template). Throws m3::Error for a directory
  // the server could not load or an unknown parser name.
  static OutputReplayer FromModelDir(const std::string& model_dir,
                                     std::string_view reasoning_parser = "auto",
                                     std::string_view tool_call_parser = "auto");

  // `request`: a JSON object with optional "messages" (default: one empty user message),
  // "tools", "tool_choice", "chat_template_kwargs", "skip_special_tokens" (default true) and
  // "stop" (a string or a list). Throws m3::Error(kInvalidArgument) for a malformed request.
  // The whole text is generated output; when it runs out without an end-of-sequence token
  // the output ends as at one (kStop, tool_calls when there are calls).
  // `chunk_tokens` 0: every id in one Step; N: N ids per Step.
  ReplayResult Replay(const nlohmann::ordered_json& request, std::string_view text,
                      size_t chunk_tokens) const;

  // The parser options Replay uses for `request` after rendering `rendered_prompt`.
  OutputParserOptions ParserOptions(const nlohmann::ordered_json& request,
                                    std::string_view rendered_prompt) const;

  const ChatFormat& format() const { return format_; }
  const PromptBuilder& prompt_builder() const { return builder_; }

 private:
  OutputReplayer(PromptBuilder builder, ChatFormat format, std::vector<int64_t> eos)
      : builder_(std::move(builder)), format_(format), eos_(std::move(eos)) {}

  PromptBuilder builder_;
  ChatFormat format_;
  std::vector<int64_t> eos_;
};

}  // namespace m3::text
