// A small JSON Schema validator written for the tests, independent of grammar/ (its own $ref
// resolution, std::regex for patterns and formats), so a generated value is checked by code
// that shares nothing with the grammar that produced it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace m3::test {

// Whether `value` validates against `schema` (root: the document $refs resolve in); `why`
// names the first failure.
bool ValidateJson(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                  const nlohmann::ordered_json& root, std::string& why);

}  // namespace m3::test
