// The structural constraint that forces a tool call (tool_choice "required", a named function,
// Anthropic's "any" / "tool"): the model's own tool-call block, as its chat template renders
// one, with each call's arguments following its tool's "parameters" schema. MiniMax-M3:
//   NS<tool_call>\n NS<invoke name="f"> NS<p>value NS</p>... NS</invoke>\n ... NS</tool_call>
// (NS: the namespace token; values as the template's to_xml writes them); MiniMax-M2 (the demo
// and test models' templates):
//   <minimax:tool_call>\n <invoke name="f">\n <parameter name="p">value</parameter>\n ...
//   </invoke>\n ... </minimax:tool_call>
// The constraint starts where the answer starts: after the reasoning when the model thinks (the
// chat path sets start_after_token), so the model may think first and then must call.
// parallel_tool_calls false allows exactly one call.
#pragma once

#include <string>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/structured_output_request.h"
#include "gateway/text/tool_call_stream.h"

namespace m3::openai {

// `tools`: the request's validated OpenAI tools list; `only`: a function name, or empty for
// any of them.
StructuredConstraint ToolCallConstraint(const Json& tools, const std::string& only, bool parallel,
                                        text::ToolCallSyntax syntax,
                                        const std::string& namespace_token = "]<]minimax[>[");

}  // namespace m3::openai
