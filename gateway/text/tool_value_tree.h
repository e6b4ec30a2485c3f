// ToolValueNode: a MiniMax-M3 tool-call parameter value as the model writes it, nested tags
// (the template's to_xml: objects as one tag per key, lists as repeated <item> tags, scalars as
// bare text), and its conversion to JSON typed by the tool's JSON schema.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::text {

struct ToolValueNode {
  std::string name;  // the tag: a parameter or key name, or "item"
  std::string text;  // the text directly inside the tag (a scalar's value)
  std::vector<ToolValueNode> children;
};

// The JSON value of `node`'s content under `schema` (nullptr: none declared):
// - no child tags: the text by ConvertBySchema, with an empty text meaning {} / [] when the
//   schema declares an object / array (the template writes an empty object or list as nothing);
// - child tags: an array of the children's values when the schema declares an array (or,
//   without a schema, when every child is <item>), else an object keyed by tag name; a schema
//   that declares only scalar types gets the structure as JSON text when it allows a string.
// nullopt when text other than whitespace sits between child tags (not the format).
std::optional<nlohmann::ordered_json> ToolValueToJson(const ToolValueNode& node,
                                                      const nlohmann::ordered_json* schema);

}  // namespace m3::text
