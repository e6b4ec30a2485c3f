// SpecialTextFilter: removes given strings (the text of special tokens) from a stream of text,
// holding back a tail that may still grow into one of them. The output chain keeps the special
// tokens its parsers read (think tags, tool-call markers) through skip_special_tokens; what the
// parsers leave in the output of them (a stray end tag, a malformed call's markers) is then
// removed here, as skip_special_tokens promised.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace m3::text {

class SpecialTextFilter {
 public:
  SpecialTextFilter() = default;
  // Empty strings are ignored.
  explicit SpecialTextFilter(std::vector<std::string> texts);

  std::string Push(std::string_view text);
  std::string Flush();  // end of the stream: releases the held-back tail

  bool active() const { return !texts_.empty(); }

 private:
  std::vector<std::string> texts_;
  std::string pending_;
};

}  // namespace m3::text
