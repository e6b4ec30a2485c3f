// ToolSchema: the parameter types declared by a request's tools (OpenAI "tools" list with JSON
// schemas), used to turn the text value of a generated <parameter> into a typed JSON value.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::text {

class ToolSchema {
 public:
  ToolSchema() = default;
  // `tools`: [{"type":"function","function":{"name":...,"parameters":{JSON schema}}}, ...]
  // (a bare {"name":...,"parameters":...} entry is accepted too). Entries without a usable
  // schema are skipped: their parameters are then converted without type information.
  explicit ToolSchema(const nlohmann::ordered_json& tools);

  // Converts `raw` for parameter `param` of tool `function`: by the declared type(s) when known
  // (string/integer/number/boolean/object/array/null; for several types the first that fits,
  // "string" last), otherwise by parsing it as JSON. Falls back to the raw string.
  nlohmann::ordered_json Convert(std::string_view function, std::string_view param,
                                 std::string_view raw) const;

  // The JSON schema of parameter `param` of tool `function`; nullptr when not declared.
  const nlohmann::ordered_json* ParameterSchema(std::string_view function,
                                                std::string_view param) const;

 private:
  // function name -> parameter name -> its JSON schema
  std::map<std::string, std::map<std::string, nlohmann::ordered_json, std::less<>>, std::less<>>
      schemas_;
};

// The JSON types a schema declares: "type" (a name or a list), those of its anyOf / oneOf
// branches, else what its enum values, "properties" or "items" imply. Empty: unknown.
std::vector<std::string> SchemaTypes(const nlohmann::ordered_json& schema);

// Converts the text `raw` by `schema` as ToolSchema::Convert does for a declared parameter
// (nullptr or a schema without types: a JSON literal when `raw` is one, else the string).
nlohmann::ordered_json ConvertBySchema(const nlohmann::ordered_json* schema, std::string_view raw);

// The schema of property `key` of an object schema (its "properties", those of its anyOf /
// oneOf branches, else an object "additionalProperties"); nullptr when none.
const nlohmann::ordered_json* PropertySchema(const nlohmann::ordered_json* schema,
                                             std::string_view key);
// The schema of an array schema's items (directly or in an anyOf / oneOf branch); nullptr when
// none.
const nlohmann::ordered_json* ItemsSchema(const nlohmann::ordered_json* schema);

}  // namespace m3::text
