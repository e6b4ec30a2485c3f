// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that the tokenizer compiles once at
// load time and shares across threads; matching allocates only per-call scratch.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/tokenizer/function_ref.h"

namespace m3::tok {

class Regex {
 public:
  // Throws m3::Error kInvalidArgument when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every non-overlapping match [start, end) of `text` (valid UTF-8) in order, the way
  // an iterator over successive leftmost matches does; an empty match advances one character.
  void ForEachMatch(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
    ForEachMatch(text, [&](size_t s, size_t e) { matches.emplace_back(s, e); });
  }

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace m3::tok
