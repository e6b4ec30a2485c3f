// The detokenize -> stop -> reasoning -> tool-call chain (see output_parser.h).
#include "gateway/text/output_parser.h"

namespace m3::text {
namespace {

// The special-token strings the active parsers read.
std::vector<std::string> ParserMarkers(const OutputParserOptions& o) {
  std::vector<std::string> markers;
  if (o.parse_reasoning) markers = {o.reasoning.start_tag, o.reasoning.end_tag};
  if (o.parse_tool_calls) {
    for (auto& m : o.tool_format.SpecialMarkers()) markers.push_back(std::move(m));
  }
  return markers;
}

// The parsers read their tags from the text, so when the tags are special tokens they must
// survive skip_special_tokens.
DetokenizerOptions DetokenizerOptionsFor(const tok::Tokenizer& tokenizer,
                                         const OutputParserOptions& o) {
  DetokenizerOptions d;
  d.skip_special_tokens = o.skip_special_tokens;
  for (const auto& tag : ParserMarkers(o)) {
    if (auto id = tokenizer.TokenToId(tag)) d.keep_special_ids.push_back(*id);
  }
  return d;
}

// The text of the special tokens kept above, when it is to be hidden afterwards.
std::vector<std::string> HiddenTexts(const tok::Tokenizer& tokenizer, const DetokenizerOptions& d,
                                     const OutputParserOptions& o) {
  std::vector<std::string> texts;
  if (!o.hide_kept_special_tokens || !o.skip_special_tokens) return texts;
  for (int32_t id : d.keep_special_ids) {
    if (tokenizer.IsSpecial(id)) texts.push_back(tokenizer.IdToToken(id));
  }
  return texts;
}

void Append(OutputDelta& into, OutputDelta&& d) {
  into.content += d.content;
  into.reasoning_content += d.reasoning_content;
  for (auto& c : d.tool_calls) into.tool_calls.push_back(std::move(c));
  if (d.finish_reason) into.finish_reason = d.finish_reason;
}

}  // namespace

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kAbort:
      return "abort";
  }
  return "stop";
}

OutputParser::OutputParser(const tok::Tokenizer& tokenizer, OutputParserOptions options)
    : options_(std::move(options)),
      detokenizer_(tokenizer, DetokenizerOptionsFor(tokenizer, options_)),
      stop_(options_.stop),
      reasoning_(options_.reasoning),
      tools_(MakeToolCallParser(ToolSchema(options_.tools), options_.make_tool_call_id,
                                options_.tool_format)) {
  const auto hidden = HiddenTexts(tokenizer, DetokenizerOptionsFor(tokenizer, options_), options_);
  content_filter_ = SpecialTextFilter(hidden);
  reasoning_filter_ = SpecialTextFilter(hidden);
}

OutputDelta OutputParser::Step(int32_t id) {
  if (finished()) return {};
  ++result_.num_tokens;
  if (stop_.IsStopToken(id)) {
    // The stop token's own text is not output; what was held back before it is.
    std::string text = stop_.Push(detokenizer_.Flush());
    if (!stop_.stopped()) {
      text += stop_.Flush();
      stop_.StopOnToken(id);
    }
    return Close(std::move(text), FinishReason::kStop);
  }
  std::string text = stop_.Push(detokenizer_.Push(id));
  if (stop_.stopped()) return Close(std::move(text), FinishReason::kStop);
  return Downstream(std::move(text), false);
}

OutputDelta OutputParser::Step(std::span<const int32_t> ids) {
  OutputDelta out;
  for (int32_t id : ids) {
    if (finished()) break;
    Append(out, Step(id));
  }
  return out;
}

OutputDelta OutputParser::Finish(FinishReason reason) {
  if (finished()) return {};
  std::string text = stop_.Push(detokenizer_.Flush());
  if (!stop_.stopped()) text += stop_.Flush();
  return Close(std::move(text), stop_.stopped() ? FinishReason::kStop : reason);
}

OutputDelta OutputParser::Close(std::string text, FinishReason reason) {
  OutputDelta out = Downstream(std::move(text), true);
  if (reason == FinishReason::kStop && !result_.tool_calls.empty())
    reason = FinishReason::kToolCalls;
  if (const auto& m = stop_.match()) {
    result_.stop_string = m->stop_string;
    result_.stop_token_id = m->stop_token_id;
  }
  out.finish_reason = reason;
  result_.finish_reason = reason;
  return out;
}

OutputDelta OutputParser::Downstream(std::string text, bool final) {
  OutputDelta out;
  ReasoningDelta r;
  if (options_.parse_reasoning) {
    r = reasoning_.Push(text);
    if (final) {
      ReasoningDelta rest = reasoning_.Flush();
      r.reasoning += rest.reasoning;
      r.content += rest.content;
    }
  } else {
    r.content = std::move(text);
  }
  out.reasoning_content = std::move(r.reasoning);
  if (options_.parse_tool_calls) {
    ToolCallDelta t = tools_->Push(r.content);
    out.content = std::move(t.content);
    out.tool_calls = std::move(t.calls);
    if (final) {
      ToolCallDelta rest = tools_->Flush();
      out.content += rest.content;
      for (auto& c : rest.calls) out.tool_calls.push_back(std::move(c));
    }
  } else {
    out.content = std::move(r.content);
  }
  if (content_filter_.active()) {
    out.content = content_filter_.Push(out.content);
    out.reasoning_content = reasoning_filter_.Push(out.reasoning_content);
    if (final) {
      out.content += content_filter_.Flush();
      out.reasoning_content += reasoning_filter_.Flush();
    }
  }
  result_.content += out.content;
  result_.reasoning_content += out.reasoning_content;
  for (const auto& c : out.tool_calls) JoinToolCallPiece(result_.tool_calls, c);
  return out;
}

}  // namespace m3::text
