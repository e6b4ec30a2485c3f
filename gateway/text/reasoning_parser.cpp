// Incremental <think>...</think> splitting (see reasoning_parser.h).
#include "gateway/text/reasoning_parser.h"

#include "gateway/text/partial_match.h"

namespace m3::text {

ReasoningParser::ReasoningParser(ReasoningOptions options)
    : options_(std::move(options)),
      in_reasoning_(options_.starts_in_reasoning),
      at_segment_start_(options_.starts_in_reasoning && options_.strip_newlines),
      at_output_start_(options_.starts_in_reasoning || options_.drop_leading_end_tag) {}

ReasoningDelta ReasoningParser::Push(std::string_view text) {
  ReasoningDelta out;
  pending_.append(text);
  if (at_output_start_ && !pending_.empty()) {
    // The prompt opened the reasoning already: a <think> the model writes again is not text.
    // Outside reasoning, a leading end tag closes a reasoning the reply does not have.
    const std::string& tag = in_reasoning_ ? options_.start_tag : options_.end_tag;
    if (pending_.size() < tag.size() && tag.starts_with(pending_)) return out;
    if (pending_.starts_with(tag)) pending_.erase(0, tag.size());
    at_output_start_ = false;
  }
  while (!pending_.empty()) {
    std::string& channel = in_reasoning_ ? out.reasoning : out.content;
    if (at_segment_start_) {
      size_t n = pending_.find_first_not_of('\n');
      pending_.erase(0, n == std::string::npos ? pending_.size() : n);
      if (pending_.empty()) break;
      at_segment_start_ = false;
    }
    const std::string& tag = in_reasoning_ ? options_.end_tag : options_.start_tag;
    size_t pos = pending_.find(tag);
    if (pos != std::string::npos) {
      size_t end = pos;
      // Newlines before </think> are template formatting, not reasoning.
      if (in_reasoning_ && options_.strip_newlines) {
        while (end > 0 && pending_[end - 1] == '\n') --end;
      }
      channel.append(pending_, 0, end);
      pending_.erase(0, pos + tag.size());
      in_reasoning_ = !in_reasoning_;
      at_segment_start_ = options_.strip_newlines;
      continue;
    }
    size_t keep = PartialSuffixLength(pending_, tag);
    if (in_reasoning_ && options_.strip_newlines) {
      // Trailing newlines may turn out to precede </think>; hold them until that is decided.
      while (keep < pending_.size() && pending_[pending_.size() - keep - 1] == '\n') ++keep;
    }
    channel.append(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    break;
  }
  return out;
}

ReasoningDelta ReasoningParser::Flush() {
  ReasoningDelta out;
  (in_reasoning_ ? out.reasoning : out.content).swap(pending_);
  pending_.clear();
  return out;
}

}  // namespace m3::text
