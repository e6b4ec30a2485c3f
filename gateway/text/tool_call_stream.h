// The tool-call side of the output chain, independent of any one model's syntax: the calls a
// parser reports (ToolCall, in pieces while streaming), the syntaxes the gateway knows
// (ToolCallFormat), and the ToolCallStreamParser interface the OutputParser drives, with the
// factory that picks the parser for a format.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/text/tool_schema.h"

namespace m3::text {

// One tool call, or one piece of it. Parsers that stream a call's arguments report it in
// pieces of the same index: the first piece carries id and name (arguments may be ""), later
// pieces only an arguments fragment; the fragments of one index concatenated are the call's
// arguments JSON text exactly. Parsers that report a call whole do so in a single piece.
struct ToolCall {
  size_t index = 0;       // position among the calls of this output
  std::string id;         // "call_..." (OpenAI tool_call id); "" on continuation pieces
  std::string name;       // "" on continuation pieces
  std::string arguments;  // JSON object text, e.g. {"city":"Paris"} (or a fragment of it)
};

// Adds a piece to whole calls: a new index starts a call, a known one gets the fragment
// appended (and an id or name the piece carries).
void JoinToolCallPiece(std::vector<ToolCall>& calls, ToolCall piece);

struct ToolCallDelta {
  std::string content;
  std::vector<ToolCall> calls;
};

enum class ToolCallSyntax {
  // <minimax:tool_call><invoke name="f"><parameter name="p">v</parameter></invoke>...
  kMiniMaxM2,
  // NS<tool_call>NS<invoke name="f">NS<p>vNS</p>NS</invoke>NS</tool_call> (NS: the namespace
  // token), values as nested tags; see m3_tool_call_parser.h.
  kMiniMaxM3,
};

struct ToolCallFormat {
  ToolCallSyntax syntax = ToolCallSyntax::kMiniMaxM2;
  // kMiniMaxM2: the block markers.
  std::string block_begin = "<minimax:tool_call>";
  std::string block_end = "</minimax:tool_call>";
  // kMiniMaxM3: the token every tag of the syntax starts with.
  std::string namespace_token = "]<]minimax[>[";

  // The strings of this syntax that a tokenizer may have as special tokens: they must reach
  // the parser even when special tokens are skipped.
  std::vector<std::string> SpecialMarkers() const;
};

class ToolCallStreamParser {
 public:
  using IdGenerator = std::function<std::string(size_t index)>;

  virtual ~ToolCallStreamParser() = default;
  // Feeds content text; returns the text that is final content and the calls (or pieces)
  // completed by it.
  virtual ToolCallDelta Push(std::string_view text) = 0;
  // End of output: whatever is withheld is released (an unfinished block as content).
  virtual ToolCallDelta Flush() = 0;
};

// "call_" + 24 random hex digits.
std::string RandomToolCallId();

// The parser of `format.syntax`. `make_id` defaults to RandomToolCallId.
std::unique_ptr<ToolCallStreamParser> MakeToolCallParser(ToolSchema schema,
                                                         ToolCallStreamParser::IdGenerator make_id,
                                                         const ToolCallFormat& format);

}  // namespace m3::text
