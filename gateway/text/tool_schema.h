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

 private:
  // function name -> parameter name -> declared JSON types
  std::map<std::string, std::map<std::string, std::vector<std::string>>, std::less<>> types_;
};

}  // namespace m3::text
