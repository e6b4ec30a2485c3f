// Stop-string and stop-token handling for streamed output (see stop_matcher.h).
#include "gateway/text/stop_matcher.h"

#include <algorithm>

#include "gateway/text/partial_match.h"
#include "shared/error.h"

namespace m3::text {

StopMatcher::StopMatcher(StopOptions options) : options_(std::move(options)) {
  for (const auto& s : options_.stop_strings) {
    Require(!s.empty(), ErrorCode::kInvalidArgument, "stop strings must not be empty");
  }
}

bool StopMatcher::IsStopToken(int32_t id) const {
  return std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), id) !=
         options_.stop_token_ids.end();
}

void StopMatcher::StopOnToken(int32_t id) {
  if (!match_) match_ = StopMatch{std::nullopt, id};
}

std::string StopMatcher::Push(std::string_view text) {
  if (match_ || text.empty()) return {};
  const size_t old_size = held_.size();
  held_.append(text);

  // The stop string that completes first wins (smallest end; on a tie the longest), which is
  // what a character-by-character stream would see, so the result does not depend on how the
  // text was chunked. A new match must end inside the new text.
  size_t best_end = std::string::npos, best_begin = 0;
  const std::string* best = nullptr;
  for (const auto& s : options_.stop_strings) {
    size_t from = old_size + 1 > s.size() ? old_size + 1 - s.size() : 0;
    size_t pos = held_.find(s, from);
    if (pos == std::string::npos) continue;
    size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_begin)) {
      best_end = end;
      best_begin = pos;
      best = &s;
    }
  }
  if (best) {
    std::string out = held_.substr(0, options_.include_stop_str_in_output ? best_end : best_begin);
    match_ = StopMatch{*best, std::nullopt};
    held_.clear();
    return out;
  }
  size_t keep = PartialSuffixLength(held_, options_.stop_strings);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace m3::text
