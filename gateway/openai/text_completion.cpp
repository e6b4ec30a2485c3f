// The text_completion responses (see text_completion.h).
#include "gateway/openai/text_completion.h"

#include <utility>

#include "gateway/openai/response_json.h"
#include "gateway/openai/sse.h"

namespace m3::openai {

using OJson = nlohmann::ordered_json;

TextCompletion::TextCompletion(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                               text::OutputParserOptions parser, bool include_usage, bool logprobs)
    : identity_(std::move(identity)),
      tokenizer_(&tokenizer),
      parser_(tokenizer, std::move(parser)),
      include_usage_(include_usage),
      logprobs_(logprobs) {}

std::string TextCompletion::Feed(std::span<const int32_t> ids,
                                 std::span<const TokenLogprob> logprobs) {
  if (parser_.finished()) return "";
  const size_t before = parser_.result().num_tokens;
  text::OutputDelta d = parser_.Step(ids);
  const size_t taken = parser_.result().num_tokens - before;
  if (logprobs_) {
    for (size_t i = 0; i < taken && i < logprobs.size(); ++i) {
      pending_logprobs_.push_back(logprobs[i]);
    }
  }
  return std::move(d.content);
}

OJson TextCompletion::Choice(std::string text, std::optional<text::FinishReason> finish) {
  OJson choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}};
  if (logprobs_) {
    // Legacy format: parallel lists; text_offset is where each token's text starts.
    const OJson entries = ChatLogprobEntries(*tokenizer_, pending_logprobs_);
    OJson tokens = OJson::array(), token_logprobs = OJson::array(), top = OJson::array(),
          offsets = OJson::array();
    for (const OJson& e : entries) {
      tokens.push_back(e["token"]);
      token_logprobs.push_back(e["logprob"]);
      OJson alternatives = OJson::object();
      for (const OJson& t : e["top_logprobs"])
        alternatives[t["token"].get<std::string>()] = t["logprob"];
      top.push_back(std::move(alternatives));
      offsets.push_back(text_offset_);
      text_offset_ += e["token"].get<std::string>().size();
    }
    pending_logprobs_.clear();
    choice["logprobs"] = {{"tokens", std::move(tokens)},
                          {"token_logprobs", std::move(token_logprobs)},
                          {"top_logprobs", std::move(top)},
                          {"text_offset", std::move(offsets)}};
  }
  choice["finish_reason"] =
      finish ? OJson(std::string(text::FinishReasonName(*finish))) : OJson(nullptr);
  return choice;
}

OJson TextCompletion::Envelope(OJson choices) const {
  return {{"id", identity_.id},
          {"object", "text_completion"},
          {"created", identity_.created},
          {"model", identity_.model},
          {"choices", std::move(choices)}};
}

std::vector<std::string> TextCompletion::PushEvents(std::span<const int32_t> ids,
                                                    std::span<const TokenLogprob> logprobs) {
  std::vector<std::string> out;
  if (finished_) return out;
  std::string text = Feed(ids, logprobs);
  if (text.empty()) return out;
  OJson chunk = Envelope(OJson::array({Choice(std::move(text), std::nullopt)}));
  if (include_usage_) chunk["usage"] = nullptr;
  out.push_back(SseEvent(chunk));
  return out;
}

std::vector<std::string> TextCompletion::FinishEvents(text::FinishReason engine_reason,
                                                      const Usage& usage) {
  std::vector<std::string> out;
  if (finished_) return out;
  finished_ = true;
  std::string text = parser_.Finish(engine_reason).content;
  OJson chunk = Envelope(OJson::array({Choice(std::move(text), parser_.result().finish_reason)}));
  if (include_usage_) chunk["usage"] = nullptr;
  out.push_back(SseEvent(chunk));
  if (include_usage_) {
    OJson u = Envelope(OJson::array());
    u["usage"] = UsageJson(usage);
    out.push_back(SseEvent(u));
  }
  out.push_back(SseDone());
  return out;
}

void TextCompletion::Push(std::span<const int32_t> ids, std::span<const TokenLogprob> logprobs) {
  Feed(ids, logprobs);
}

OJson TextCompletion::FinishBody(text::FinishReason engine_reason, const Usage& usage) {
  finished_ = true;
  parser_.Finish(engine_reason);
  OJson body =
      Envelope(OJson::array({Choice(parser_.result().content, parser_.result().finish_reason)}));
  body["usage"] = UsageJson(usage);
  return body;
}

}  // namespace m3::openai
