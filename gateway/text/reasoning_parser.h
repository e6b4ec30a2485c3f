// ReasoningParser: splits streamed model text into the reasoning channel (between <think> and
// </think>) and the content channel. MiniMax-M2/M3 chat templates open <think> in the
// generation prompt, so output usually starts inside the reasoning (a model that repeats the
// <think> anyway is handled); an explicit <think> in the output is recognised too. Tags split
// across chunks are withheld until they are decided.
#pragma once

#include <string>
#include <string_view>

namespace m3::text {

struct ReasoningOptions {
  std::string start_tag = "<think>";
  std::string end_tag = "</think>";
  // True when the prompt already opened the reasoning block (the generation prompt ends in
  // "<think>\n"), so the first output text is reasoning.
  bool starts_in_reasoning = true;
  // Drop the newlines the templates put around the tags: after <think>, before </think> and
  // after </think>. The chat template adds them back when the turn is rendered again.
  bool strip_newlines = true;
  // When the output does not start in reasoning: one end tag at its very start is dropped
  // (MiniMax-M3 in adaptive mode opens a reply without thinking with a bare </mm:think>). A
  // later end tag outside reasoning stays content.
  bool drop_leading_end_tag = false;
};

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningOptions options = {});

  ReasoningDelta Push(std::string_view text);
  // End of output: releases withheld text to the channel it belongs to.
  ReasoningDelta Flush();

  bool in_reasoning() const { return in_reasoning_; }

 private:
  ReasoningOptions options_;
  bool in_reasoning_;
  bool at_segment_start_;  // right after a tag: leading newlines are dropped
  bool at_output_start_;   // nothing seen yet: a redundant leading tag may follow
  std::string pending_;
};

}  // namespace m3::text
