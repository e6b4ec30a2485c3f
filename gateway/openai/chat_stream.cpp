// Chat completion SSE chunks (see chat_stream.h).
#include "gateway/openai/chat_stream.h"

#include <utility>

#include "gateway/openai/response_json.h"
#include "gateway/openai/sse.h"

namespace m3::openai {

using OJson = nlohmann::ordered_json;

ChatStream::ChatStream(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                       text::OutputParserOptions parser, bool include_usage, bool logprobs)
    : identity_(std::move(identity)),
      tokenizer_(&tokenizer),
      parser_(tokenizer, std::move(parser)),
      include_usage_(include_usage),
      logprobs_(logprobs) {}

OJson ChatStream::Chunk(OJson delta, std::optional<text::FinishReason> finish) {
  OJson choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}};
  if (logprobs_ && !pending_logprobs_.empty()) {
    choice["logprobs"] = {{"content", ChatLogprobEntries(*tokenizer_, pending_logprobs_)}};
    pending_logprobs_.clear();
  }
  choice["finish_reason"] =
      finish ? OJson(std::string(text::FinishReasonName(*finish))) : OJson(nullptr);
  OJson chunk = {{"id", identity_.id},
                 {"object", "chat.completion.chunk"},
                 {"created", identity_.created},
                 {"model", identity_.model},
                 {"choices", OJson::array({std::move(choice)})}};
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

std::vector<std::string> ChatStream::Start() {
  return {SseEvent(Chunk({{"role", "assistant"}, {"content", ""}}, std::nullopt))};
}

void ChatStream::Emit(text::OutputDelta d, std::vector<std::string>& out) {
  // One chunk per channel keeps each delta simple for clients that read a single field.
  if (!d.reasoning_content.empty()) {
    out.push_back(SseEvent(Chunk({{"reasoning_content", d.reasoning_content}}, std::nullopt)));
  }
  if (!d.content.empty()) {
    out.push_back(SseEvent(Chunk({{"content", d.content}}, std::nullopt)));
  }
  if (!d.tool_calls.empty()) {
    OJson calls = OJson::array();
    for (const auto& c : d.tool_calls) calls.push_back(ToolCallJson(c, /*with_index=*/true));
    out.push_back(SseEvent(Chunk({{"tool_calls", std::move(calls)}}, std::nullopt)));
  }
}

std::vector<std::string> ChatStream::Push(std::span<const int32_t> ids,
                                          std::span<const TokenLogprob> logprobs) {
  std::vector<std::string> out;
  if (finished_ || parser_.finished()) return out;
  if (logprobs_) {
    // Only the ids the parser takes count: after a stop, later ids are not output.
    const size_t before = parser_.result().num_tokens;
    text::OutputDelta d = parser_.Step(ids);
    const size_t taken = parser_.result().num_tokens - before;
    for (size_t i = 0; i < taken && i < logprobs.size(); ++i) {
      pending_logprobs_.push_back(logprobs[i]);
    }
    d.finish_reason.reset();
    Emit(std::move(d), out);
  } else {
    text::OutputDelta d = parser_.Step(ids);
    d.finish_reason.reset();
    Emit(std::move(d), out);
  }
  return out;
}

std::vector<std::string> ChatStream::Finish(text::FinishReason engine_reason, const Usage& usage) {
  std::vector<std::string> out;
  if (finished_) return out;
  finished_ = true;
  text::OutputDelta d = parser_.Finish(engine_reason);
  d.finish_reason.reset();
  Emit(std::move(d), out);
  out.push_back(SseEvent(Chunk(OJson::object(), parser_.result().finish_reason)));
  if (include_usage_) {
    OJson chunk = {{"id", identity_.id},           {"object", "chat.completion.chunk"},
                   {"created", identity_.created}, {"model", identity_.model},
                   {"choices", OJson::array()},    {"usage", UsageJson(usage)}};
    out.push_back(SseEvent(chunk));
  }
  out.push_back(SseDone());
  return out;
}

}  // namespace m3::openai
