// The "pattern" of Replace normalizers/decoders and Split pre-tokenizers: either a literal
// string ({"String": ...}) or a regex ({"Regex": ...}), found left to right without overlap.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/tokenizer/json_util.h"
#include "gateway/tokenizer/regex.h"

namespace m3::tok {

class Pattern {
 public:
  explicit Pattern(const Json& j);  // {"String": s} or {"Regex": r}
  // Appends the [start, end) ranges of every match, left to right.
  void ForEachMatch(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
    ForEachMatch(text, [&](size_t s, size_t e) { out.emplace_back(s, e); });
  }
  std::string ReplaceAll(std::string_view text, std::string_view replacement) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace m3::tok
