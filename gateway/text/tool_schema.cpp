// Schema-driven conversion of tool-call parameter values (see tool_schema.h).
#include "gateway/text/tool_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace m3::text {
namespace {

using Json = nlohmann::ordered_json;

void CollectTypes(const Json& schema, std::vector<std::string>& out) {
  if (!schema.is_object()) return;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) out.push_back(it->get<std::string>());
    if (it->is_array()) {
      for (const auto& t : *it) {
        if (t.is_string()) out.push_back(t.get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const auto& sub : *it) CollectTypes(sub, out);
    }
  }
  if (out.empty() && schema.contains("enum") && schema["enum"].is_array()) {
    for (const auto& v : schema["enum"]) {
      if (v.is_string()) out.push_back("string");
      if (v.is_number_integer()) out.push_back("integer");
      if (v.is_number_float()) out.push_back("number");
      if (v.is_boolean()) out.push_back("boolean");
    }
  }
  if (out.empty() && schema.contains("properties")) out.push_back("object");
  if (out.empty() && schema.contains("items")) out.push_back("array");
}

std::optional<Json> ParseJson(std::string_view raw) {
  Json v = Json::parse(raw.begin(), raw.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<Json> ConvertAs(const std::string& type, std::string_view raw) {
  std::string_view t = Trim(raw);
  if (type == "string") return Json(std::string(raw));
  if (type == "integer") {
    int64_t v = 0;
    const char* first = t.data() + (!t.empty() && t.front() == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(first, t.data() + t.size(), v);
    if (ec == std::errc() && ptr == t.data() + t.size() && !t.empty()) return Json(v);
    // "3.0" is an integer in JSON-schema terms.
    if (auto j = ParseJson(t); j && j->is_number_float()) {
      double d = j->get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d))) return Json(static_cast<int64_t>(d));
    }
    return std::nullopt;
  }
  if (type == "number") {
    if (auto j = ParseJson(t); j && j->is_number()) return j;
    return std::nullopt;
  }
  if (type == "boolean") {
    std::string lower(t);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "true") return Json(true);
    if (lower == "false") return Json(false);
    return std::nullopt;
  }
  if (type == "null") {
    if (t == "null" || t == "None") return Json(nullptr);
    return std::nullopt;
  }
  if (type == "object" || type == "array") {
    auto j = ParseJson(t);
    if (j && ((type == "object" && j->is_object()) || (type == "array" && j->is_array()))) return j;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

ToolSchema::ToolSchema(const Json& tools) {
  if (!tools.is_array()) return;
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const Json& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) continue;
    auto& params = schemas_[fn["name"].get<std::string>()];
    auto it = fn.find("parameters");
    if (it == fn.end() || !it->is_object()) continue;
    auto props = it->find("properties");
    if (props == it->end() || !props->is_object()) continue;
    for (const auto& [name, schema] : props->items()) params[name] = schema;
  }
}

const Json* ToolSchema::ParameterSchema(std::string_view function, std::string_view param) const {
  auto f = schemas_.find(function);
  if (f == schemas_.end()) return nullptr;
  auto p = f->second.find(param);
  return p == f->second.end() ? nullptr : &p->second;
}

Json ToolSchema::Convert(std::string_view function, std::string_view param,
                         std::string_view raw) const {
  return ConvertBySchema(ParameterSchema(function, param), raw);
}

std::vector<std::string> SchemaTypes(const Json& schema) {
  std::vector<std::string> types;
  CollectTypes(schema, types);
  return types;
}

Json ConvertBySchema(const Json* schema, std::string_view raw) {
  const std::vector<std::string> types = schema ? SchemaTypes(*schema) : std::vector<std::string>{};
  if (types.empty()) {
    if (auto j = ParseJson(Trim(raw)); j && !Trim(raw).empty()) return *j;
    return Json(std::string(raw));
  }
  // Non-string types first: a declared ["string","integer"] value "7" is most likely the number.
  for (const auto& t : types) {
    if (t == "string") continue;
    if (auto j = ConvertAs(t, raw)) return *j;
  }
  return Json(std::string(raw));
}

const Json* PropertySchema(const Json* schema, std::string_view key) {
  if (!schema || !schema->is_object()) return nullptr;
  if (auto props = schema->find("properties"); props != schema->end() && props->is_object()) {
    if (auto it = props->find(std::string(key)); it != props->end()) return &*it;
  }
  for (const char* branches : {"anyOf", "oneOf"}) {
    if (auto it = schema->find(branches); it != schema->end() && it->is_array()) {
      for (const auto& sub : *it) {
        if (const Json* found = PropertySchema(&sub, key)) return found;
      }
    }
  }
  if (auto extra = schema->find("additionalProperties");
      extra != schema->end() && extra->is_object()) {
    return &*extra;
  }
  return nullptr;
}

const Json* ItemsSchema(const Json* schema) {
  if (!schema || !schema->is_object()) return nullptr;
  if (auto items = schema->find("items"); items != schema->end() && items->is_object()) {
    return &*items;
  }
  for (const char* branches : {"anyOf", "oneOf"}) {
    if (auto it = schema->find(branches); it != schema->end() && it->is_array()) {
      for (const auto& sub : *it) {
        if (const Json* found = ItemsSchema(&sub)) return found;
      }
    }
  }
  return nullptr;
}

}  // namespace m3::text
