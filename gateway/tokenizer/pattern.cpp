// Literal-or-regex pattern matching for Replace and Split.
#include "gateway/tokenizer/pattern.h"

namespace m3::tok {

Pattern::Pattern(const Json& j) {
  if (!j.is_object())
    throw Error(ErrorCode::kInvalidArgument, "tokenizer pattern is not an object");
  if (auto it = j.find("String"); it != j.end() && it->is_string()) {
    literal_ = it->get<std::string>();
  } else if (auto r = j.find("Regex"); r != j.end() && r->is_string()) {
    regex_ = std::make_unique<Regex>(r->get<std::string>());
  } else {
    throw Error(ErrorCode::kInvalidArgument, "tokenizer pattern needs a 'String' or 'Regex' field");
  }
}

void Pattern::ForEachMatch(std::string_view text,
                           FunctionRef<void(size_t, size_t)> on_match) const {
  if (regex_) {
    regex_->ForEachMatch(text, on_match);
    return;
  }
  if (literal_.empty()) return;  // an empty literal matches nothing useful
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    on_match(pos, pos + literal_.size());
    pos += literal_.size();
  }
}

std::string Pattern::ReplaceAll(std::string_view text, std::string_view replacement) const {
  std::vector<std::pair<size_t, size_t>> matches;
  FindAll(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * replacement.size());
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    out.append(text.substr(prev, s - prev));
    out.append(replacement);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace m3::tok
