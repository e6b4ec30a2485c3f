// Partial-marker detection for the streaming scanners (see partial_match.h).
#include "gateway/text/partial_match.h"

#include <algorithm>

namespace m3::text {

size_t PartialSuffixLength(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  // Only suffixes shorter than the marker can be proper prefixes of it; try the longest first.
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  }
  return 0;
}

size_t PartialSuffixLength(std::string_view text, std::span<const std::string> markers) {
  size_t best = 0;
  for (const auto& m : markers) best = std::max(best, PartialSuffixLength(text, m));
  return best;
}

}  // namespace m3::text
