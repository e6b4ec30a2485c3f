// Tool-call syntaxes and the parser factory (see tool_call_stream.h).
#include "gateway/text/tool_call_stream.h"

#include <cstdio>
#include <random>

#include "gateway/text/m3_tool_call_parser.h"
#include "gateway/text/tool_call_parser.h"

namespace m3::text {

std::vector<std::string> ToolCallFormat::SpecialMarkers() const {
  if (syntax == ToolCallSyntax::kMiniMaxM3) {
    return {namespace_token, "<tool_call>", "</tool_call>"};
  }
  return {block_begin, block_end};
}

void JoinToolCallPiece(std::vector<ToolCall>& calls, ToolCall piece) {
  if (piece.index >= calls.size()) {
    calls.push_back(std::move(piece));
    return;
  }
  ToolCall& whole = calls[piece.index];
  if (!piece.id.empty()) whole.id = std::move(piece.id);
  if (!piece.name.empty()) whole.name = std::move(piece.name);
  whole.arguments += piece.arguments;
}

std::string RandomToolCallId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

std::unique_ptr<ToolCallStreamParser> MakeToolCallParser(ToolSchema schema,
                                                         ToolCallStreamParser::IdGenerator make_id,
                                                         const ToolCallFormat& format) {
  if (format.syntax == ToolCallSyntax::kMiniMaxM3) {
    return std::make_unique<M3ToolCallParser>(std::move(schema), std::move(make_id),
                                              format.namespace_token);
  }
  return std::make_unique<ToolCallParser>(std::move(schema), std::move(make_id), format);
}

}  // namespace m3::text
