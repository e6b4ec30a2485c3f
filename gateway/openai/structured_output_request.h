// StructuredConstraint: what a request asks its output to follow, read from the fields clients
// of OpenAI and vLLM send: response_format {type: json_object | json_schema {name, schema,
// strict} | text}, vLLM's structured_outputs {json, regex, choice, grammar, json_object} and
// the older guided_json / guided_regex / guided_choice / guided_grammar. At most one may be
// given (400 naming both otherwise). The engine compiles it against its tokenizer (a schema,
// regex or grammar it cannot compile is a 400 from there); here only shapes are checked. Tool
// calls forced by tool_choice become a structural constraint (tool_call_grammar.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/field_reader.h"

namespace m3::openai {

struct StructuralTagSpec {
  std::string begin;
  std::string schema_json;  // empty: any text not containing `end`
  bool m3_xml = false;      // arguments as M3 parameter tags (not JSON)
  bool m2_xml = false;      // arguments as M2 <parameter name="k"> lines (not JSON)
  std::string xml_tag_prefix;
  std::string end;
};

struct StructuredConstraint {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kStructural };
  Kind kind = Kind::kJsonObject;
  std::string text;  // kJsonSchema: the schema's JSON; kRegex: the pattern; kGrammar: EBNF
  std::vector<std::string> choices;
  bool any_whitespace = false;
  bool strict = true;  // JSON schema: unlisted properties never generated
  // kStructural: [free text] prefix, min_count..max_count tags joined by separator, suffix.
  bool allow_free_text = false;
  std::string prefix, separator, suffix;
  int min_count = 1, max_count = 1;  // max -1: unbounded
  std::vector<StructuralTagSpec> tags;
  std::string param;  // the request field it came from (error messages)
  // Set by the chat path when the output starts in reasoning: the constraint applies after
  // this token (the end-of-thinking tag).
  std::optional<int32_t> start_after_token;
};

// Throws RequestError 400 naming the field for wrong shapes and for two constraints at once.
std::optional<StructuredConstraint> ParseStructuredOutput(const FieldReader& body);

}  // namespace m3::openai
