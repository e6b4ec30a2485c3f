// Chat format detection and per-request parser configuration (see chat_format.h).
#include "gateway/text/chat_format.h"

#include "shared/error.h"

namespace m3::text {
namespace {

constexpr std::string_view kM3Namespace = "]<]minimax[>[";

std::string Canonical(std::string_view name) {
  std::string s(name);
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

std::string_view TrimEnd(std::string_view s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

ChatFormat DetectChatFormat(std::string_view source) {
  ChatFormat f;
  const bool m3_think = source.find("<mm:think>") != std::string_view::npos;
  // The M3 template builds its block marker from the namespace token and "<tool_call>".
  const bool m3_tools = source.find(kM3Namespace) != std::string_view::npos &&
                        source.find("<tool_call>") != std::string_view::npos;
  f.reasoning = m3_think ? ReasoningSyntax::kMiniMaxM3 : ReasoningSyntax::kMiniMaxM2;
  if (m3_tools && source.find("<minimax:tool_call>") == std::string_view::npos) {
    f.tool_calls = ToolCallSyntax::kMiniMaxM3;
  } else {
    f.tool_calls = ToolCallSyntax::kMiniMaxM2;
  }
  return f;
}

ChatFormat ResolveChatFormat(std::string_view source, std::string_view reasoning_parser,
                             std::string_view tool_call_parser) {
  const ChatFormat detected = DetectChatFormat(source);
  ChatFormat f = detected;
  const std::string r = Canonical(reasoning_parser);
  if (r == "minimax_m2") {
    f.reasoning = ReasoningSyntax::kMiniMaxM2;
  } else if (r == "minimax_m3") {
    f.reasoning = ReasoningSyntax::kMiniMaxM3;
  } else if (r == "none") {
    f.reasoning.reset();
  } else if (!r.empty() && r != "auto") {
    throw Error(ErrorCode::kInvalidArgument, "--reasoning-parser: unknown parser '" +
                                                 std::string(reasoning_parser) +
                                                 "' (auto, minimax_m2, minimax_m3 or none)");
  }
  const std::string t = Canonical(tool_call_parser);
  if (t == "minimax_m2") {
    f.tool_calls = ToolCallSyntax::kMiniMaxM2;
  } else if (t == "minimax_m3") {
    f.tool_calls = ToolCallSyntax::kMiniMaxM3;
  } else if (t == "none") {
    f.tool_calls.reset();
  } else if (!t.empty() && t != "auto") {
    throw Error(ErrorCode::kInvalidArgument, "--tool-call-parser: unknown parser '" +
                                                 std::string(tool_call_parser) +
                                                 "' (auto, minimax_m2, minimax_m3 or none)");
  }
  return f;
}

std::string ReasoningSyntaxName(const std::optional<ReasoningSyntax>& syntax) {
  if (!syntax) return "none";
  return *syntax == ReasoningSyntax::kMiniMaxM3 ? "minimax_m3" : "minimax_m2";
}

std::string ToolCallSyntaxName(const std::optional<ToolCallSyntax>& syntax) {
  if (!syntax) return "none";
  return *syntax == ToolCallSyntax::kMiniMaxM3 ? "minimax_m3" : "minimax_m2";
}

ReasoningStart DetectReasoningStart(std::string_view rendered, std::string_view start_tag,
                                    std::string_view end_tag) {
  rendered = TrimEnd(rendered);
  if (!start_tag.empty() && rendered.ends_with(start_tag)) return ReasoningStart::kInReasoning;
  if (!end_tag.empty() && rendered.ends_with(end_tag)) return ReasoningStart::kClosed;
  return ReasoningStart::kAdaptive;
}

ReasoningOptions ReasoningOptionsFor(ReasoningSyntax syntax, std::string_view rendered_prompt) {
  ReasoningOptions r;
  if (syntax == ReasoningSyntax::kMiniMaxM3) {
    r.start_tag = "<mm:think>";
    r.end_tag = "</mm:think>";
    // The M3 template writes <mm:think>reasoning</mm:think>content with nothing between.
    r.strip_newlines = false;
    r.drop_leading_end_tag = true;
  }
  r.starts_in_reasoning =
      DetectReasoningStart(rendered_prompt, r.start_tag, r.end_tag) == ReasoningStart::kInReasoning;
  return r;
}

void ApplyChatFormat(const ChatFormat& format, std::string_view rendered_prompt,
                     OutputParserOptions& o) {
  o.parse_reasoning = format.reasoning.has_value();
  if (format.reasoning) o.reasoning = ReasoningOptionsFor(*format.reasoning, rendered_prompt);
  o.parse_tool_calls = o.parse_tool_calls && format.tool_calls.has_value();
  if (format.tool_calls) o.tool_format.syntax = *format.tool_calls;
  o.hide_kept_special_tokens = true;
}

}  // namespace m3::text
