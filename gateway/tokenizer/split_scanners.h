// Hand-compiled matchers for the two regexes almost every byte-level BPE tokenizer splits with:
// the GPT-2 pattern (ByteLevel use_regex) and the Llama-3 style pattern MiniMax uses in its
// Split pre-tokenizer. They return exactly the matches the regex would (leftmost-first
// alternation, the same backtracking outcome) at a fraction of a regex engine's cost; any
// other pattern goes to PCRE2. Character classes follow Oniguruma's Unicode semantics
// (\p{L}, \p{N}, \s = White_Space), which is what the `tokenizers` library runs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "gateway/tokenizer/function_ref.h"

namespace m3::tok {

class SplitScanner {
 public:
  enum class Kind { kGpt2, kLlama3 };
  explicit SplitScanner(Kind kind);
  // The scanner for `regex` when it is one of the known patterns, else nullptr.
  static std::unique_ptr<SplitScanner> ForPattern(const std::string& regex);
  static const char* Gpt2Pattern();
  static const char* Llama3Pattern();

  // Calls on_match(start, end) for every match in `text` (valid UTF-8), in order.
  void ForEachMatch(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;

 private:
  Kind kind_;
};

}  // namespace m3::tok
