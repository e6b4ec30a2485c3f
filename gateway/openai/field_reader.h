// FieldReader: typed access to the fields of one JSON object of a request, where every wrong
// type or out-of-range value becomes a RequestError naming the field by its full path
// ("messages[2].content[0].image_url.detail"). A field set to null counts as absent, as the
// OpenAI API treats optional fields.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/content/json_type_name.h"
#include "gateway/openai/request_error.h"

namespace m3::openai {

using Json = nlohmann::ordered_json;

// Throws a 400 RequestError: `code` "invalid_value" for a bad value, "invalid_type" for a
// wrong JSON type, "missing_required_parameter" for an absent field.
[[noreturn]] void InvalidField(const std::string& param, const std::string& message,
                               std::string code = "invalid_value");

// Joins parts with append: GCC 12 reports a false -Wrestrict on "literal" + std::string chains.
std::string Cat(std::initializer_list<std::string_view> parts);

// "string", "integer", "number", "boolean", "object", "array", "null".
using content::JsonTypeName;

class FieldReader {
 public:
  // `object` must outlive the reader; `path` prefixes field names ("" at the top level).
  // Throws when `object` is not an object.
  FieldReader(const Json& object, std::string path);

  std::string Path(std::string_view name) const;
  bool Has(std::string_view name) const;         // present and not null
  const Json* Get(std::string_view name) const;  // nullptr when absent or null

  std::optional<bool> Bool(std::string_view name) const;
  std::optional<int64_t> Int(std::string_view name, int64_t min, int64_t max) const;
  // [min, max], or (min, max] with `min_exclusive`.
  std::optional<double> Number(std::string_view name, double min, double max,
                               bool min_exclusive = false) const;
  std::optional<std::string> String(std::string_view name) const;
  std::string RequiredString(std::string_view name) const;
  const Json* Object(std::string_view name) const;
  const Json* Array(std::string_view name) const;

 private:
  const Json& object_;
  std::string path_;
};

}  // namespace m3::openai
