// Incremental MiniMax-M3 tool-call parsing (see m3_tool_call_parser.h).
#include "gateway/text/m3_tool_call_parser.h"

#include <algorithm>

#include "gateway/text/name_attribute.h"
#include "gateway/text/partial_match.h"

namespace m3::text {
namespace {

using Json = nlohmann::ordered_json;

// A tag longer than this without its '>' is not a tag the model meant.
constexpr size_t kMaxTag = 1024;
// Whitespace the model may put between NS and '<'; more and it is not a tag.
constexpr size_t kMaxSpace = 16;

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

M3ToolCallParser::M3ToolCallParser(ToolSchema schema, IdGenerator make_id,
                                   std::string namespace_token)
    : schema_(std::move(schema)), make_id_(std::move(make_id)), ns_(std::move(namespace_token)) {
  if (!make_id_) make_id_ = [](size_t) { return RandomToolCallId(); };
  if (ns_.empty()) ns_ = "]<]minimax[>[";
}

M3ToolCallParser::Tag M3ToolCallParser::ScanTag(size_t pos) const {
  Tag t;
  size_t i = pos + ns_.size();
  size_t spaces = 0;
  while (i < buf_.size() && IsSpace(buf_[i])) {
    ++i;
    if (++spaces > kMaxSpace) return t;
  }
  t.scan = Tag::Scan::kNeedMore;
  if (i >= buf_.size()) return t;
  t.scan = Tag::Scan::kNotTag;
  if (buf_[i] != '<') return t;
  ++i;
  if (i >= buf_.size()) {
    t.scan = Tag::Scan::kNeedMore;
    return t;
  }
  t.closing = buf_[i] == '/';
  if (t.closing) ++i;
  const size_t gt = buf_.find('>', i);
  if (gt == std::string::npos) {
    if (buf_.size() - i <= kMaxTag) t.scan = Tag::Scan::kNeedMore;
    return t;
  }
  if (gt - i > kMaxTag || gt == i) return t;
  std::string_view inner = std::string_view(buf_).substr(i, gt - i);
  // The next namespace token starts the next tag: this one never closed.
  if (inner.find(ns_) != std::string_view::npos) return t;
  t.scan = Tag::Scan::kTag;
  t.end = gt + 1;
  if (!t.closing && inner.size() > 6 && inner.starts_with("invoke") && IsSpace(inner[6])) {
    t.invoke = true;
    t.name = "invoke";
    t.attributes.assign(buf_, i + 6, gt + 1 - (i + 6));
  } else {
    t.name.assign(inner);
  }
  return t;
}

ToolCallDelta M3ToolCallParser::Push(std::string_view text) {
  ToolCallDelta out;
  buf_.append(text);
  Run(out);
  return out;
}

ToolCallDelta M3ToolCallParser::Flush() {
  ToolCallDelta out;
  if (state_ == State::kInvoke || state_ == State::kParam || state_ == State::kOrphan) {
    EndCall(out);
  }
  // Whitespace between a block's elements is layout, also when the block never closed.
  const bool layout = (state_ == State::kBlock || state_ == State::kInvoke) &&
                      buf_.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!layout) out.content += buf_;
  buf_.clear();
  stack_.clear();
  scan_ = 0;
  state_ = State::kText;
  return out;
}

void M3ToolCallParser::StartCall(std::string name, ToolCallDelta& out) {
  ToolCall call;
  call.index = call_index_ = next_index_++;
  call.id = make_id_(call.index);
  call.name = name;
  call_name_ = std::move(name);
  call_params_ = 0;
  out.calls.push_back(std::move(call));
}

void M3ToolCallParser::AddParameter(const std::string& name, const Json& value,
                                    ToolCallDelta& out) {
  ToolCall piece;
  piece.index = call_index_;
  piece.arguments = (call_params_++ == 0 ? "{" : ",") + Dump(Json(name)) + ":" + Dump(value);
  out.calls.push_back(std::move(piece));
}

void M3ToolCallParser::EndCall(ToolCallDelta& out) {
  ToolCall piece;
  piece.index = call_index_;
  piece.arguments = call_params_ == 0 ? "{}" : "}";
  out.calls.push_back(std::move(piece));
  call_name_.clear();
  call_params_ = 0;
}

void M3ToolCallParser::MalformedInCall(ToolCallDelta& out) {
  EndCall(out);
  stack_.clear();
  scan_ = 0;
  state_ = State::kSkip;
}

void M3ToolCallParser::Run(ToolCallDelta& out) {
  using Scan = Tag::Scan;
  auto leading_space = [&] {
    size_t n = 0;
    while (n < buf_.size() && IsSpace(buf_[n])) ++n;
    return n;
  };
  // True when buf_[n..] is a proper prefix of NS: the next text decides.
  auto partial_ns_at = [&](size_t n) {
    return buf_.size() - n < ns_.size() && std::string_view(ns_).starts_with(buf_.substr(n));
  };
  auto emit = [&](size_t n) {
    out.content.append(buf_, 0, n);
    buf_.erase(0, n);
  };

  for (;;) {
    switch (state_) {
      case State::kText: {
        const size_t pos = buf_.find(ns_);
        if (pos == std::string::npos) {
          emit(buf_.size() - PartialSuffixLength(buf_, ns_));
          return;
        }
        emit(pos);
        const Tag t = ScanTag(0);
        if (t.scan == Scan::kNeedMore) return;
        if (t.scan == Scan::kTag && !t.closing && t.name == "tool_call") {
          buf_.erase(0, t.end);
          state_ = State::kBlock;
        } else {
          emit(ns_.size());  // a namespace token that starts no block is text
        }
        break;
      }
      case State::kBlock: {
        const size_t n = leading_space();
        if (n == buf_.size()) return;
        if (buf_.compare(n, ns_.size(), ns_) != 0) {
          if (partial_ns_at(n)) return;
          buf_.erase(0, n);
          scan_ = 0;
          state_ = State::kSkip;  // text inside the block: content, up to the next invoke
          break;
        }
        const Tag t = ScanTag(n);
        if (t.scan == Scan::kNeedMore) return;
        buf_.erase(0, n);
        const size_t end = t.end - n;
        std::string name;
        if (t.scan == Scan::kTag && t.closing && t.name == "tool_call") {
          buf_.erase(0, end);
          state_ = State::kText;
        } else if (t.scan == Scan::kTag && t.invoke && ParseNameAttribute(t.attributes, name)) {
          buf_.erase(0, end);
          StartCall(std::move(name), out);
          state_ = State::kInvoke;
        } else {
          scan_ = ns_.size();  // this tag is the first of the text given back
          state_ = State::kSkip;
        }
        break;
      }
      case State::kSkip: {
        const size_t pos = buf_.find(ns_, scan_);
        if (pos == std::string::npos) {
          emit(buf_.size() - PartialSuffixLength(buf_, ns_));
          scan_ = 0;
          return;
        }
        const Tag t = ScanTag(pos);
        if (t.scan == Scan::kNeedMore) {
          emit(pos);
          scan_ = 0;
          return;
        }
        if (t.scan == Scan::kTag && t.closing && t.name == "invoke") {
          emit(t.end);
          scan_ = 0;
          state_ = State::kBlock;
        } else if (t.scan == Scan::kTag && (t.invoke || (t.closing && t.name == "tool_call"))) {
          emit(pos);
          scan_ = 0;
          state_ = State::kBlock;
        } else {
          scan_ = pos + ns_.size();
        }
        break;
      }
      case State::kInvoke: {
        const size_t n = leading_space();
        if (n == buf_.size()) return;
        if (buf_.compare(n, ns_.size(), ns_) != 0) {
          if (partial_ns_at(n)) return;
          buf_.erase(0, n);
          orphan_start_ = scan_ = 0;
          state_ = State::kOrphan;  // a value whose opening tag is missing
          break;
        }
        const Tag t = ScanTag(n);
        if (t.scan == Scan::kNeedMore) return;
        buf_.erase(0, n);
        const size_t end = t.end - n;
        if (t.scan == Scan::kNotTag) {
          orphan_start_ = scan_ = ns_.size();
          state_ = State::kOrphan;
        } else if (t.closing && t.name == "invoke") {
          buf_.erase(0, end);
          EndCall(out);
          state_ = State::kBlock;
        } else if (t.closing && t.name == "tool_call") {
          buf_.erase(0, end);
          EndCall(out);
          state_ = State::kText;
        } else if (t.invoke) {
          EndCall(out);  // its NS</invoke> is missing
          state_ = State::kBlock;
        } else if (t.closing) {
          // A close tag with nothing before it: an empty value whose opening tag is missing.
          ToolValueNode node{t.name, {}, {}};
          auto v = ToolValueToJson(node, schema_.ParameterSchema(call_name_, t.name));
          AddParameter(t.name, *v, out);
          buf_.erase(0, end);
        } else {
          stack_.clear();
          stack_.push_back(ToolValueNode{t.name, {}, {}});
          scan_ = end;
          state_ = State::kParam;
        }
        break;
      }
      case State::kOrphan: {
        const size_t pos = buf_.find(ns_, scan_);
        if (pos == std::string::npos) {
          scan_ = std::max(scan_, buf_.size() - PartialSuffixLength(buf_, ns_));
          return;
        }
        const Tag t = ScanTag(pos);
        if (t.scan == Scan::kNeedMore) {
          scan_ = pos;
          return;
        }
        if (t.scan == Scan::kNotTag) {
          scan_ = pos + ns_.size();
        } else if (t.closing && t.name != "invoke" && t.name != "tool_call") {
          ToolValueNode node{t.name, buf_.substr(orphan_start_, pos - orphan_start_), {}};
          auto v = ToolValueToJson(node, schema_.ParameterSchema(call_name_, t.name));
          AddParameter(t.name, *v, out);
          buf_.erase(0, t.end);
          scan_ = 0;
          state_ = State::kInvoke;
        } else {
          MalformedInCall(out);
        }
        break;
      }
      case State::kParam: {
        const size_t pos = buf_.find(ns_, scan_);
        if (pos == std::string::npos) {
          const size_t upto = std::max(scan_, buf_.size() - PartialSuffixLength(buf_, ns_));
          stack_.back().text.append(buf_, scan_, upto - scan_);
          scan_ = upto;
          return;
        }
        const Tag t = ScanTag(pos);
        stack_.back().text.append(buf_, scan_, pos - scan_);
        scan_ = pos;
        if (t.scan == Scan::kNeedMore) return;
        if (t.scan == Scan::kNotTag) {
          // A namespace token that starts no tag is markup gone astray, not part of the value.
          scan_ = pos + ns_.size();
          break;
        }
        if (t.invoke || (t.closing && (t.name == "invoke" || t.name == "tool_call"))) {
          MalformedInCall(out);  // the value never closed
          break;
        }
        if (!t.closing) {
          stack_.push_back(ToolValueNode{t.name, {}, {}});
          scan_ = t.end;
          break;
        }
        size_t depth = stack_.size();
        while (depth > 0 && stack_[depth - 1].name != t.name) --depth;
        if (depth == 0) {
          MalformedInCall(out);  // closes nothing that is open
          break;
        }
        // A close tag further out closes the tags inside it that never closed.
        while (stack_.size() > depth) {
          ToolValueNode child = std::move(stack_.back());
          stack_.pop_back();
          stack_.back().children.push_back(std::move(child));
        }
        if (depth > 1) {
          ToolValueNode closed = std::move(stack_.back());
          stack_.pop_back();
          stack_.back().children.push_back(std::move(closed));
          scan_ = t.end;
          break;
        }
        const ToolValueNode& param = stack_.front();
        auto v = ToolValueToJson(param, schema_.ParameterSchema(call_name_, param.name));
        if (!v) {
          MalformedInCall(out);
          break;
        }
        AddParameter(param.name, *v, out);
        stack_.clear();
        buf_.erase(0, t.end);
        scan_ = 0;
        state_ = State::kInvoke;
        break;
      }
    }
  }
}

}  // namespace m3::text
