// A forced tool call as a structural grammar (see tool_call_constraint.h).
#include "gateway/openai/tool_call_constraint.h"

namespace m3::openai {

StructuredConstraint ToolCallConstraint(const Json& tools, const std::string& only, bool parallel,
                                        text::ToolCallSyntax syntax, const std::string& ns) {
  const bool m3 = syntax == text::ToolCallSyntax::kMiniMaxM3;
  StructuredConstraint c;
  c.kind = StructuredConstraint::Kind::kStructural;
  c.param = "tool_choice";
  c.strict = true;
  // The template's layout: the block opener and a newline, each invoke ending in a newline,
  // then the block closer.
  c.prefix = m3 ? ns + "<tool_call>\n" : "<minimax:tool_call>\n";
  c.separator = "";
  c.suffix = m3 ? ns + "</tool_call>" : "</minimax:tool_call>";
  c.min_count = 1;
  c.max_count = parallel ? -1 : 1;
  for (const Json& t : tools) {
    const Json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    StructuralTagSpec tag;
    tag.begin = m3 ? ns + "<invoke name=\"" + name + "\">" : "<invoke name=\"" + name + "\">\n";
    const auto params = fn.find("parameters");
    tag.schema_json = params != fn.end() && params->is_object()
                          ? params->dump()
                          : std::string(R"({"type":"object","properties":{}})");
    tag.m3_xml = m3;
    tag.m2_xml = !m3;
    tag.xml_tag_prefix = m3 ? ns : "";
    tag.end = m3 ? ns + "</invoke>\n" : "</invoke>\n";
    c.tags.push_back(std::move(tag));
  }
  return c;
}

}  // namespace m3::openai
