// Incremental MiniMax XML tool-call parsing (see tool_call_parser.h).
#include "gateway/text/tool_call_parser.h"

#include "gateway/text/name_attribute.h"
#include "gateway/text/partial_match.h"

namespace m3::text {
namespace {

constexpr std::string_view kInvokeOpen = "<invoke";
constexpr std::string_view kInvokeClose = "</invoke>";
constexpr std::string_view kParamOpen = "<parameter";
constexpr std::string_view kParamClose = "</parameter>";
// An opening tag longer than this without its '>' is not a tag the model meant.
constexpr size_t kMaxOpenTag = 1024;

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// True when `text` is a (possibly complete) prefix of `marker`: more input may complete it.
bool CouldBecome(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolSchema schema, IdGenerator make_id, ToolCallFormat format)
    : schema_(std::move(schema)), make_id_(std::move(make_id)), format_(std::move(format)) {
  if (!make_id_) make_id_ = [](size_t) { return RandomToolCallId(); };
}

ToolCallDelta ToolCallParser::Push(std::string_view text) {
  ToolCallDelta out;
  buf_.append(text);
  Run(out);
  return out;
}

ToolCallDelta ToolCallParser::Flush() {
  ToolCallDelta out;
  if (state_ != State::kText) out.content += raw_;
  out.content += buf_;
  raw_.clear();
  buf_.clear();
  state_ = State::kText;
  return out;
}

void ToolCallParser::Consume(size_t n) {
  raw_.append(buf_, 0, n);
  buf_.erase(0, n);
}

void ToolCallParser::Malformed(ToolCallDelta& out) {
  out.content += raw_;
  raw_.clear();
  state_ = State::kText;
}

void ToolCallParser::Commit(ToolCallDelta& out) {
  ToolCall call;
  call.index = next_index_++;
  call.id = make_id_(call.index);
  call.name = std::move(name_);
  call.arguments = args_.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  out.calls.push_back(std::move(call));
  name_.clear();
  args_ = nlohmann::ordered_json::object();
  raw_.clear();
}

void ToolCallParser::Run(ToolCallDelta& out) {
  auto skip_space = [&] {
    size_t n = 0;
    while (n < buf_.size() && IsSpace(buf_[n])) ++n;
    Consume(n);
  };
  auto starts = [&](std::string_view p) { return std::string_view(buf_).starts_with(p); };
  // Parses the opening tag `<keyword name="...">` at the start of buf_. Returns 1 when parsed
  // (consumed), 0 when more input is needed, -1 when it is not such a tag.
  auto open_tag = [&](std::string_view keyword, std::string& name) {
    size_t gt = buf_.find('>');
    if (gt == std::string::npos) return buf_.size() > kMaxOpenTag ? -1 : 0;
    if (!ParseNameAttribute(std::string_view(buf_).substr(keyword.size(), gt + 1 - keyword.size()),
                            name)) {
      return -1;
    }
    Consume(gt + 1);
    return 1;
  };

  for (;;) {
    switch (state_) {
      case State::kText: {
        size_t pos = buf_.find(format_.block_begin);
        if (pos == std::string::npos) {
          size_t keep = PartialSuffixLength(buf_, format_.block_begin);
          out.content.append(buf_, 0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return;
        }
        out.content.append(buf_, 0, pos);
        buf_.erase(0, pos);
        raw_.clear();
        Consume(format_.block_begin.size());
        state_ = State::kBlock;
        break;
      }
      case State::kBlock: {
        skip_space();
        if (buf_.empty()) return;
        if (starts(format_.block_end)) {
          Consume(format_.block_end.size());
          raw_.clear();
          state_ = State::kText;
        } else if (starts(kInvokeOpen)) {
          int r = open_tag(kInvokeOpen, name_);
          if (r == 0) return;
          if (r < 0) {
            Malformed(out);
          } else {
            args_ = nlohmann::ordered_json::object();
            state_ = State::kInvoke;
          }
        } else if (CouldBecome(buf_, format_.block_end) || CouldBecome(buf_, kInvokeOpen)) {
          return;
        } else {
          Malformed(out);
        }
        break;
      }
      case State::kInvoke: {
        skip_space();
        if (buf_.empty()) return;
        if (starts(kInvokeClose)) {
          Consume(kInvokeClose.size());
          Commit(out);
          state_ = State::kBlock;
        } else if (starts(format_.block_end)) {
          // A missing </invoke> before the block end: the invoke is still complete.
          Commit(out);
          state_ = State::kBlock;
        } else if (starts(kParamOpen)) {
          int r = open_tag(kParamOpen, param_);
          if (r == 0) return;
          if (r < 0) {
            Malformed(out);
          } else {
            value_scan_ = 0;
            state_ = State::kValue;
          }
        } else if (CouldBecome(buf_, kInvokeClose) || CouldBecome(buf_, kParamOpen) ||
                   CouldBecome(buf_, format_.block_end)) {
          return;
        } else {
          Malformed(out);
        }
        break;
      }
      case State::kValue: {
        size_t pos = buf_.find(kParamClose, value_scan_);
        if (pos == std::string::npos) {
          value_scan_ =
              buf_.size() >= kParamClose.size() ? buf_.size() - kParamClose.size() + 1 : 0;
          return;
        }
        // The template writes values bare; newlines a model puts around them are layout.
        std::string_view value = std::string_view(buf_).substr(0, pos);
        while (!value.empty() && (value.front() == '\n' || value.front() == '\r')) {
          value.remove_prefix(1);
        }
        while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) {
          value.remove_suffix(1);
        }
        args_[param_] = schema_.Convert(name_, param_, value);
        Consume(pos + kParamClose.size());
        state_ = State::kInvoke;
        break;
      }
    }
  }
}

}  // namespace m3::text
