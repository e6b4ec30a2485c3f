// ToolCallParser: extracts MiniMax XML tool calls from streamed content text:
//   <minimax:tool_call>
//   <invoke name="get_weather">
//   <parameter name="city">Paris</parameter>
//   </invoke>
//   </minimax:tool_call>
// (several invokes per block, several blocks). Each invoke is reported once it is complete, with
// its parameters converted by the tool schema into a JSON arguments object. Text outside the
// blocks stays content; a partial tag is withheld until decided; a block that does not follow
// the format is given back as content, from the first unparsable point.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/text/tool_schema.h"

namespace m3::text {

struct ToolCall {
  size_t index = 0;  // position among the calls of this output
  std::string id;    // "call_..." (OpenAI tool_call id)
  std::string name;
  std::string arguments;  // JSON object text, e.g. {"city": "Paris"}
};

struct ToolCallDelta {
  std::string content;
  std::vector<ToolCall> calls;
};

struct ToolCallFormat {
  std::string block_begin = "<minimax:tool_call>";
  std::string block_end = "</minimax:tool_call>";
};

class ToolCallParser {
 public:
  using IdGenerator = std::function<std::string(size_t index)>;

  // `make_id` defaults to "call_" + random hex, unique per parser.
  explicit ToolCallParser(ToolSchema schema = {}, IdGenerator make_id = {},
                          ToolCallFormat format = {});

  ToolCallDelta Push(std::string_view text);
  // End of output: an unfinished block is returned as content.
  ToolCallDelta Flush();

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
