// StopMatcher: ends generation on stop strings (matched across token boundaries) and stop token
// ids. Text that could still be the beginning of a stop string is withheld until it either
// completes the stop string or can no longer match, so a client never sees a partial stop string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace m3::text {

struct StopOptions {
  std::vector<std::string> stop_strings;  // each non-empty
  std::vector<int32_t> stop_token_ids;    // e.g. EOS and the request's stop_token_ids
  bool include_stop_str_in_output = false;
};

struct StopMatch {
  std::optional<std::string> stop_string;  // the stop string that matched
  std::optional<int32_t> stop_token_id;    // or the stop token that ended generation
};

class StopMatcher {
 public:
  // Throws m3::Error(kInvalidArgument) for an empty stop string.
  explicit StopMatcher(StopOptions options);

  bool IsStopToken(int32_t id) const;

  // Feeds newly decoded text; returns the text that is now final. When a stop string completes,
  // the returned text ends right before it (or after it, with include_stop_str_in_output) and
  // stopped() becomes true; later calls return "".
  std::string Push(std::string_view text);

  // Records that a stop token ended generation.
  void StopOnToken(int32_t id);

  // End of generation without a stop string: releases the withheld text.
  std::string Flush();

  bool stopped() const { return match_.has_value(); }
  const std::optional<StopMatch>& match() const { return match_; }

 private:
  StopOptions options_;
  std::string held_;  // text withheld because it may begin a stop string
  std::optional<StopMatch> match_;
};

}  // namespace m3::text
