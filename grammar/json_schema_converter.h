// JSON Schema -> GrammarIr: the value grammar of a schema, as compact JSON (or with bounded
// whitespace), or as M3's tool-call XML rendering of argument values (the template's to_xml).
// Supported: type (and arrays of types), properties, required, additionalProperties,
// enum, const, anyOf / oneOf (as anyOf), allOf (shallow merge), items, prefixItems,
// minItems / maxItems, string pattern / minLength / maxLength / format, number and integer
// minimum / maximum / exclusive*, $ref / $defs / definitions (with "#" recursion), nullable.
// Annotations (description, title, examples, default) are ignored. Approximations are listed
// in grammar/README.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar_ir.h"

namespace m3::grammar {

struct SchemaEncoding {
  bool m3_xml = false;
  std::string xml_tag_prefix;  // m3_xml: the text before every parameter tag
  // M2: the top-level object as <parameter name="k">value</parameter> lines, string values raw,
  // other values JSON.
  bool m2_xml = false;
  // Raw strings may not contain this (empty: xml_tag_prefix, or "<" when that is empty too).
  std::string raw_terminator;
};

// The value grammar of `schema` as an expression of `ir` (rules added for $refs and shared
// pieces). Throws kInvalidArgument naming the keyword and its path.
ExprId ConvertJsonSchema(GrammarIr& ir, const nlohmann::ordered_json& schema,
                         const JsonSchemaOptions& options, const SchemaEncoding& encoding = {});
// Any JSON value / any JSON object (json_object mode).
ExprId AnyJsonObject(GrammarIr& ir, const JsonSchemaOptions& options);
// Any text not containing `s` (non-empty), as right-recursive rules over code points.
ExprId TextNotContaining(GrammarIr& ir, std::string_view s);
// The integers in [lo, hi] as exact digit strings; has_lo / has_hi false: unbounded that side.
ExprId IntegerRange(GrammarIr& ir, bool has_lo, long long lo, bool has_hi, long long hi);

}  // namespace m3::grammar
