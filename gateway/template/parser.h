// Parser from tokens to the AST, following jinja2.parser's grammar and operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < postfix/filters/tests).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gateway/template/ast.h"
#include "gateway/template/template_limits.h"

namespace m3::tmpl {

// Throws m3::Error(kInvalidArgument, "<name>:<line>: ...") on a syntax error or a construct the
// engine does not support ({% extends %}, {% include %}, {% import %}, {% block %}, recursive
// loops). Throws kTooLarge when the source is longer than limits.max_source_bytes or nests
// blocks or expressions deeper than limits.max_nesting.
std::unique_ptr<Program> ParseProgram(std::string_view source, const std::string& name,
                                      const TemplateLimits& limits = {});

}  // namespace m3::tmpl
