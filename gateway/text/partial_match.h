// Helpers for streaming text scanners: how much of a text's tail could still grow into one of a
// set of markers (tags, stop strings), so that tail is withheld until the next chunk decides.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace m3::text {

// Length of the longest suffix of `text` that is a proper, non-empty prefix of `marker`.
size_t PartialSuffixLength(std::string_view text, std::string_view marker);

// The maximum of PartialSuffixLength over all markers.
size_t PartialSuffixLength(std::string_view text, std::span<const std::string> markers);

}  // namespace m3::text
