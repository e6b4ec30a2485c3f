// A forced tool call as a structural grammar (see tool_call_constraint.h).
#include "gateway/openai/tool_call_constraint.h"

namespace m3::openai {

StructuredConstraint ToolCallConstraint(const Json& tools, const std::string& only, bool parallel,
                                        text::ToolCallSyntax syntax, const std::string& ns) {
  if (syntax != text::ToolCallSyntax::kMiniMaxM3) {
    InvalidField("tool_choice",
                 "forcing a tool call ('tool_choice' \"required\" or a named function) needs the "
                 "MiniMax-M3 tool-call format; this model's chat template uses the M2 format",
                 "unsupported_value");
  }
  StructuredConstraint c;
  c.kind = StructuredConstraint::Kind::kStructural;
  c.param = "tool_choice";
  c.strict = true;
  // The template's layout: the block opener and a newline, each invoke ending in a newline,
  // then the block closer.
  c.prefix = ns + "<tool_call>\n";
  c.separator = "";
  c.suffix = ns + "</tool_call>";
  c.min_count = 1;
  c.max_count = parallel ? -1 : 1;
  for (const Json& t : tools) {
    const Json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    StructuralTagSpec tag;
    tag.begin = ns + "<invoke name=\"" + name + "\">";
    const auto params = fn.find("parameters");
    tag.schema_json = params != fn.end() && params->is_object()
                          ? params->dump()
                          : std::string(R"({"type":"object","properties":{}})");
    tag.m3_xml = true;
    tag.xml_tag_prefix = ns;
    tag.end = ns + "</invoke>\n";
    c.tags.push_back(std::move(tag));
  }
  return c;
}

}  // namespace m3::openai
