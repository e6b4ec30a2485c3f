// JsonTypeName: the JSON type of a value as error messages name it ("got integer").
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace m3::content {

// "string", "integer", "number", "boolean", "object", "array", "null".
std::string_view JsonTypeName(const nlohmann::json& value);
std::string_view JsonTypeName(const nlohmann::ordered_json& value);

}  // namespace m3::content
