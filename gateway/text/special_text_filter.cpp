// Streaming removal of special-token text (see special_text_filter.h).
#include "gateway/text/special_text_filter.h"

#include <algorithm>

#include "gateway/text/partial_match.h"

namespace m3::text {

SpecialTextFilter::SpecialTextFilter(std::vector<std::string> texts) : texts_(std::move(texts)) {
  std::erase_if(texts_, [](const std::string& t) { return t.empty(); });
}

std::string SpecialTextFilter::Push(std::string_view text) {
  if (texts_.empty()) return std::string(text);
  pending_.append(text);
  std::string out;
  size_t from = 0;
  for (;;) {
    // The earliest occurrence of any of the texts (the longest where several start there).
    size_t best = std::string::npos, best_len = 0;
    for (const auto& t : texts_) {
      const size_t pos = pending_.find(t, from);
      if (pos < best || (pos == best && pos != std::string::npos && t.size() > best_len)) {
        best = pos;
        best_len = t.size();
      }
    }
    if (best == std::string::npos) break;
    out.append(pending_, from, best - from);
    from = best + best_len;
  }
  const std::string_view rest = std::string_view(pending_).substr(from);
  const size_t keep = PartialSuffixLength(rest, texts_);
  out.append(rest.substr(0, rest.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string SpecialTextFilter::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace m3::text
