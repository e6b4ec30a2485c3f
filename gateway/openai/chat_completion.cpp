// The non-streaming chat.completion body (see chat_completion.h).
#include "gateway/openai/chat_completion.h"

#include <utility>

#include "gateway/openai/response_json.h"

namespace m3::openai {

using OJson = nlohmann::ordered_json;

ChatCompletion::ChatCompletion(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                               text::OutputParserOptions parser, bool logprobs)
    : identity_(std::move(identity)),
      tokenizer_(&tokenizer),
      parser_(tokenizer, std::move(parser)),
      logprobs_(logprobs) {}

void ChatCompletion::Push(std::span<const int32_t> ids, std::span<const TokenLogprob> logprobs) {
  const size_t before = parser_.result().num_tokens;
  parser_.Step(ids);
  const size_t taken = parser_.result().num_tokens - before;
  if (!logprobs_) return;
  for (size_t i = 0; i < taken && i < logprobs.size(); ++i) logprob_tokens_.push_back(logprobs[i]);
}

OJson ChatCompletion::Finish(text::FinishReason engine_reason, const Usage& usage) {
  parser_.Finish(engine_reason);
  const text::OutputResult& r = parser_.result();
  OJson message = {{"role", "assistant"}};
  // OpenAI gives null content for a reply that is only tool calls.
  message["content"] =
      r.content.empty() && !r.tool_calls.empty() ? OJson(nullptr) : OJson(r.content);
  message["reasoning_content"] =
      r.reasoning_content.empty() ? OJson(nullptr) : OJson(r.reasoning_content);
  if (!r.tool_calls.empty()) {
    OJson calls = OJson::array();
    for (const auto& c : r.tool_calls) calls.push_back(ToolCallJson(c, /*with_index=*/false));
    message["tool_calls"] = std::move(calls);
  }
  OJson choice = {{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr}};
  if (logprobs_)
    choice["logprobs"] = {{"content", ChatLogprobEntries(*tokenizer_, logprob_tokens_)}};
  choice["finish_reason"] = std::string(text::FinishReasonName(*r.finish_reason));
  return {{"id", identity_.id},
          {"object", "chat.completion"},
          {"created", identity_.created},
          {"model", identity_.model},
          {"choices", OJson::array({std::move(choice)})},
          {"usage", UsageJson(usage)}};
}

}  // namespace m3::openai
