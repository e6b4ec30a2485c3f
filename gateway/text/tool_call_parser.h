// ToolCallParser: extracts MiniMax XML tool calls from streamed content text:
//   <minimax:tool_call>
//   <invoke name="get_weather">
//   <parameter name="city">Paris</parameter>
//   </invoke>
//   </minimax:tool_call>
// (several invokes per block, several blocks). Each invoke is reported once it is complete, with
// its parameters converted by the tool schema into a JSON arguments object. Text outside the
// blocks stays content; a partial tag is withheld until decided; a block that does not follow
// the format is given back as content, from the first unparsable point. Calls are reported
// whole, one piece each (ToolCall in tool_call_stream.h).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/text/tool_call_stream.h"
#include "gateway/text/tool_schema.h"

namespace m3::text {

class ToolCallParser : public ToolCallStreamParser {
 public:
  // `make_id` defaults to "call_" + random hex, unique per parser.
  explicit ToolCallParser(ToolSchema schema = {}, IdGenerator make_id = {},
                          ToolCallFormat format = {});

  ToolCallDelta Push(std::string_view text) override;
  // End of output: an unfinished block is returned as content.
  ToolCallDelta Flush() override;

  size_t num_calls() const { return next_index_; }

 private:
  enum class State { kText, kBlock, kInvoke, kValue };

  void Run(ToolCallDelta& out);
  void Consume(size_t n);
  void Malformed(ToolCallDelta& out);
  void Commit(ToolCallDelta& out);

  ToolSchema schema_;
  IdGenerator make_id_;
  ToolCallFormat format_;
  State state_ = State::kText;
  std::string buf_;        // text not consumed yet
  std::string raw_;        // consumed block text since the last committed invoke (for give-back)
  size_t value_scan_ = 0;  // how far buf_ was searched for </parameter>
  std::string name_;       // current invoke
  std::string param_;      // current parameter
  nlohmann::ordered_json args_;
  size_t next_index_ = 0;
};

}  // namespace m3::text
