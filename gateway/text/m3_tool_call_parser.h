// M3ToolCallParser: extracts MiniMax-M3 tool calls from streamed content text. Every tag starts
// with the namespace token NS (`]<]minimax[>[`, a special token), one block holds all calls:
//   NS<tool_call>
//   NS<invoke name="get_weather">NS<city>SeattleNS</city>NS<days>3NS</days>NS</invoke>
//   NS</tool_call>
// The parameter name is the tag; values are the template's to_xml: objects as nested tags,
// lists as repeated NS<item> tags, scalars bare, typed back by the tool's JSON schema
// (tool_value_tree.h).
//
// Streaming: a call's first piece (id, name) goes out as soon as its invoke tag closes, then
// one arguments fragment per completed parameter (`{"city":"Seattle"`, `,"days":3`) and the
// closing `}` at NS</invoke>: the fragments concatenated are the arguments JSON exactly.
//
// What the model gets wrong is survived: whitespace between NS and '<'; a parameter whose
// opening tag is missing (`NS<invoke name="f">NSvalueNS</p>`: value of p); a missing
// NS</invoke>; a close tag that skips inner closes; a stray NS inside a value (dropped). Text
// before and after blocks is content.
// An invoke whose tag is not the format is given back as content up to its NS</invoke>; a
// parameter that cannot be parsed ends its call (already announced, so it cannot be taken
// back) with the parameters before it, and its text up to the call's end is given back as
// content. Either way the calls after it in the block are parsed as usual.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/text/tool_call_stream.h"
#include "gateway/text/tool_schema.h"
#include "gateway/text/tool_value_tree.h"

namespace m3::text {

class M3ToolCallParser : public ToolCallStreamParser {
 public:
  explicit M3ToolCallParser(ToolSchema schema = {}, IdGenerator make_id = {},
                            std::string namespace_token = "]<]minimax[>[");

  ToolCallDelta Push(std::string_view text) override;
  // End of output: a call in progress ends with its complete parameters; the rest is content.
  ToolCallDelta Flush() override;

  size_t num_calls() const { return next_index_; }

  // A tag: NS, optional whitespace, '<', optional '/', the text up to '>'.
  struct Tag {
    enum class Scan { kNeedMore, kNotTag, kTag };
    Scan scan = Scan::kNotTag;
    bool closing = false;
    std::string name;        // the tag's text ("invoke" for an invoke tag)
    std::string attributes;  // an invoke tag's text after "invoke" (` name="f">` with the '>')
    bool invoke = false;     // an opening `<invoke name...>` (attributes follow "invoke")
    size_t end = 0;          // one past '>'
  };

 private:
  enum class State {
    kText,    // outside blocks
    kBlock,   // inside a block, between invokes
    kInvoke,  // inside an announced call, between parameters
    kParam,   // inside a parameter's value (the tag stack in stack_)
    kOrphan,  // a value whose opening tag is missing, until its close tag
    kSkip,    // giving a malformed invoke back as content, until its end
  };

  Tag ScanTag(size_t pos) const;  // buf_[pos..] starts with NS
  void Run(ToolCallDelta& out);
  void StartCall(std::string name, ToolCallDelta& out);
  void AddParameter(const std::string& name, const nlohmann::ordered_json& value,
                    ToolCallDelta& out);
  void EndCall(ToolCallDelta& out);
  void MalformedInCall(ToolCallDelta& out);  // ends the call; buf_ becomes skipped content

  ToolSchema schema_;
  IdGenerator make_id_;
  std::string ns_;
  State state_ = State::kText;
  std::string buf_;  // text not given out yet (in kParam/kOrphan: from the value's start)
  size_t scan_ = 0;  // how far buf_ has been examined in the current state
  size_t orphan_start_ = 0;
  std::vector<ToolValueNode> stack_;  // kParam: the open tags, the parameter first
  std::string call_name_;
  size_t call_index_ = 0;
  size_t call_params_ = 0;
  size_t next_index_ = 0;
};

}  // namespace m3::text
