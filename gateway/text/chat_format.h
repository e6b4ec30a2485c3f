// ChatFormat: which reasoning and tool-call syntax a model speaks, read from its chat template
// (MiniMax-M3: `<mm:think>` and `]<]minimax[>[<tool_call>`; the MiniMax-M2 style of the demo and
// test models: `<think>` and `<minimax:tool_call>`) or named by the --reasoning-parser /
// --tool-call-parser flags, and how it configures the output chain for one request: the parsers
// and their markers, and where the reasoning starts, decided from the end of the rendered prompt.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gateway/text/output_parser.h"
#include "gateway/text/tool_call_stream.h"

namespace m3::text {

enum class ReasoningSyntax {
  kMiniMaxM2,  // <think>...</think>, newlines around the tags are layout
  kMiniMaxM3,  // <mm:think>...</mm:think>, exact; a bare leading </mm:think> is dropped
};

struct ChatFormat {
  std::optional<ReasoningSyntax> reasoning = ReasoningSyntax::kMiniMaxM2;  // nullopt: none
  std::optional<ToolCallSyntax> tool_calls = ToolCallSyntax::kMiniMaxM2;   // nullopt: none
};

// From the template source: M3 markers select M3, else M2 (what the gateway always parsed, so
// templates with neither keep that behaviour).
ChatFormat DetectChatFormat(std::string_view template_source);

// The parser names of the flags: "auto" (detected from the template), "minimax_m2",
// "minimax_m3" (a '-' may stand for '_'), "none". Throws m3::Error(kInvalidArgument) naming
// the flag for any other name.
ChatFormat ResolveChatFormat(std::string_view template_source, std::string_view reasoning_parser,
                             std::string_view tool_call_parser);

// "minimax_m2", "minimax_m3" or "none".
std::string ReasoningSyntaxName(const std::optional<ReasoningSyntax>& syntax);
std::string ToolCallSyntaxName(const std::optional<ToolCallSyntax>& syntax);

// Where the model's output starts, from the end of the rendered prompt only (the system text
// of the M3 template shows `<mm:think></mm:think>` as an instruction; only the generation
// prompt counts): after an open tag in reasoning, after an end tag outside it (thinking
// disabled), else the model decides (adaptive).
enum class ReasoningStart { kInReasoning, kClosed, kAdaptive };
ReasoningStart DetectReasoningStart(std::string_view rendered_prompt, std::string_view start_tag,
                                    std::string_view end_tag);

// The reasoning parser options of `syntax` for a prompt (its tags, newline handling, start).
ReasoningOptions ReasoningOptionsFor(ReasoningSyntax syntax, std::string_view rendered_prompt);

// Configures `o` for `format` and the request's rendered prompt: parse_reasoning and the
// reasoning options, the tool-call syntax (parse_tool_calls is left on only when the request
// asked for it and the format has tool calls), and hiding the special-token text the parsers
// leave. Stop conditions, skip_special_tokens and tools are the caller's.
void ApplyChatFormat(const ChatFormat& format, std::string_view rendered_prompt,
                     OutputParserOptions& o);

}  // namespace m3::text
