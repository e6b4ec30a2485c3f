// Typed conversion of M3 nested-tag values (see tool_value_tree.h).
#include "gateway/text/tool_value_tree.h"

#include <algorithm>

#include "gateway/text/tool_schema.h"

namespace m3::text {
namespace {

using Json = nlohmann::ordered_json;

bool Has(const std::vector<std::string>& types, std::string_view t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

std::optional<Json> ToolValueToJson(const ToolValueNode& node, const Json* schema) {
  const std::vector<std::string> types = schema ? SchemaTypes(*schema) : std::vector<std::string>{};
  if (node.children.empty()) {
    if (node.text.empty() && !Has(types, "string")) {
      if (Has(types, "object")) return Json::object();
      if (Has(types, "array")) return Json::array();
    }
    return ConvertBySchema(schema, node.text);
  }
  if (!IsBlank(node.text)) return std::nullopt;
  const bool all_items = std::all_of(node.children.begin(), node.children.end(),
                                     [](const ToolValueNode& c) { return c.name == "item"; });
  const bool structured = types.empty() || Has(types, "object") || Has(types, "array");
  if (!structured) {
    // A scalar schema but nested tags: the structure itself, as text where a string is allowed.
    auto plain = ToolValueToJson(node, nullptr);
    if (plain && Has(types, "string")) {
      return Json(plain->dump(-1, ' ', false, Json::error_handler_t::replace));
    }
    return plain;
  }
  const bool as_array =
      types.empty() ? all_items : Has(types, "array") && (all_items || !Has(types, "object"));
  if (as_array) {
    const Json* items = ItemsSchema(schema);
    Json out = Json::array();
    for (const auto& child : node.children) {
      auto v = ToolValueToJson(child, items);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
    }
    return out;
  }
  Json out = Json::object();
  for (const auto& child : node.children) {
    auto v = ToolValueToJson(child, PropertySchema(schema, child.name));
    if (!v) return std::nullopt;
    out[child.name] = std::move(*v);
  }
  return out;
}

}  // namespace m3::text
