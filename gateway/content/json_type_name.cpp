// JSON type names for error messages (see json_type_name.h).
#include "gateway/content/json_type_name.h"

namespace m3::content {
namespace {

template <typename Json>
std::string_view TypeName(const Json& value) {
  if (value.is_string()) return "string";
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  if (value.is_boolean()) return "boolean";
  if (value.is_object()) return "object";
  if (value.is_array()) return "array";
  return "null";
}

}  // namespace

std::string_view JsonTypeName(const nlohmann::json& value) {
  return TypeName(value);
}

std::string_view JsonTypeName(const nlohmann::ordered_json& value) {
  return TypeName(value);
}

}  // namespace m3::content
