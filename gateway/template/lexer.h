// Tokenizer for Jinja2 source, mirroring jinja2's lexer with trim_blocks=True and
// lstrip_blocks=True: newline normalization, the dropped final newline, {%- -%} {{- -}} {#- -#}
// stripping, +%} opt-outs, comments and {% raw %} blocks, bracket balancing inside tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace m3::tmpl {

enum class TokenType {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof
};

struct Token {
  TokenType type;
  std::string text;  // data text, name, decoded string literal, operator
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

std::vector<Token> Tokenize(std::string_view source, const std::string& name);

// Throws m3::Error(kInvalidArgument, "<name>:<line>: <message>").
[[noreturn]] void ThrowSyntaxError(const std::string& name, int line, const std::string& message);

}  // namespace m3::tmpl
