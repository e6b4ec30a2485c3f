// GBNF-style EBNF (the grammar text llama.cpp and XGrammar accept) lowered to GrammarIr:
//   name ::= alternatives    (a rule ends where the next `name ::=` begins)
//   "text" 'text' with \n \t \r \\ \" \' \xHH \uHHHH \UHHHHHHHH escapes, [a-z\n] [^...] classes,
//   rule references, ( ), |, . (any character), postfix * + ? {m} {m,} {m,n}, # comments.
#pragma once

#include <string_view>

#include "grammar/grammar_ir.h"

namespace m3::grammar {

// Adds the grammar's rules to `ir` and sets ir.root to `root_rule`.
void ParseEbnf(GrammarIr& ir, std::string_view text, std::string_view root_rule);

}  // namespace m3::grammar
