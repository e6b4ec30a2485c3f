// Regular expressions (the ECMAScript subset JSON Schema patterns and vLLM's guided_regex use)
// lowered to GrammarIr expressions over UTF-8: literals and escapes, ., classes with ranges and
// negation, \d \w \s and their negations, groups (capturing, (?:...)), alternation, * + ? {m}
// {m,} {m,n} (lazy forms read as greedy: a full match does not care). Anchors ^ and $ are only
// accepted at the ends (the whole text always matches in full). Backreferences and lookaround
// are refused with kInvalidArgument.
#pragma once

#include <string_view>

#include "grammar/grammar_ir.h"

namespace m3::grammar {

struct RegexOptions {
  // Inside a JSON string: characters the JSON string must escape (" \ and controls) are
  // produced in their escaped form, so the text stays a valid JSON string literal.
  bool json_string = false;
};

ExprId ParseRegex(GrammarIr& ir, std::string_view regex, const RegexOptions& options = {});

}  // namespace m3::grammar
