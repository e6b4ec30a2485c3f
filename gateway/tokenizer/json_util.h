// Small helpers for reading tokenizer.json fields with errors that name the offending field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "shared/error.h"

namespace m3::tok {

using Json = nlohmann::json;

// The "type" of a pipeline component, or "" when absent.
inline std::string TypeOf(const Json& j) {
  if (!j.is_object()) {
    throw Error(ErrorCode::kInvalidArgument, "tokenizer component is not a JSON object");
  }
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// j[key] as T, or `fallback` when missing or null; a present value of the wrong type throws.
template <typename T>
T Field(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("tokenizer field '") + key + "' has the wrong type");
  }
}

// A required field.
template <typename T>
T Required(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    throw Error(ErrorCode::kInvalidArgument,
                where + ": missing field '" + key + "' in tokenizer.json");
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorCode::kInvalidArgument,
                where + ": field '" + key + "' has the wrong type in tokenizer.json");
  }
}

// A required child object/array, by reference (no copy of large vocabularies).
inline const Json& Child(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    throw Error(ErrorCode::kInvalidArgument,
                where + ": missing field '" + key + "' in tokenizer.json");
  }
  return *it;
}

// An optional child: nullptr when missing or null.
inline const Json* FindChild(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace m3::tok
