// The chat and text completion formatters (see response_formatter.h).
#include "gateway/openai/response_formatter.h"

#include <utility>

#include "gateway/openai/chat_completion.h"
#include "gateway/openai/chat_stream.h"
#include "gateway/openai/request_error.h"
#include "gateway/openai/sse.h"
#include "gateway/openai/text_completion.h"

namespace m3::openai {

std::string ResponseFormatter::ErrorBody(int http_status, std::string_view message,
                                         std::string_view code) const {
  return openai::ErrorBody(http_status, message, std::nullopt, code).dump();
}

std::vector<std::string> ResponseFormatter::StreamErrorEvents(int http_status,
                                                              std::string_view message,
                                                              std::string_view code) const {
  return {SseError(openai::ErrorBody(http_status, message, std::nullopt, code)), SseDone()};
}
namespace {

std::string Dump(const nlohmann::ordered_json& body) {
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

class ChatStreamFormatter : public ResponseFormatter {
 public:
  ChatStreamFormatter(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                      text::OutputParserOptions options, bool include_usage, bool logprobs)
      : stream_(tokenizer, std::move(identity), std::move(options), include_usage, logprobs) {}
  bool streaming() const override { return true; }
  std::vector<std::string> Start() override { return stream_.Start(); }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const TokenLogprob> logprobs) override {
    return stream_.Push(ids, logprobs);
  }
  std::vector<std::string> Finish(text::FinishReason reason, const Usage& usage) override {
    return stream_.Finish(reason, usage);
  }
  bool output_finished() const override { return stream_.output_finished(); }

 private:
  ChatStream stream_;
};

class ChatWholeFormatter : public ResponseFormatter {
 public:
  ChatWholeFormatter(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                     text::OutputParserOptions options, bool logprobs)
      : whole_(tokenizer, std::move(identity), std::move(options), logprobs) {}
  bool streaming() const override { return false; }
  std::vector<std::string> Start() override { return {}; }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const TokenLogprob> logprobs) override {
    whole_.Push(ids, logprobs);
    return {};
  }
  std::vector<std::string> Finish(text::FinishReason reason, const Usage& usage) override {
    return {Dump(whole_.Finish(reason, usage))};
  }
  bool output_finished() const override { return whole_.output_finished(); }

 private:
  ChatCompletion whole_;
};

class CompletionFormatter : public ResponseFormatter {
 public:
  CompletionFormatter(const tok::Tokenizer& tokenizer, ResponseIdentity identity,
                      text::OutputParserOptions options, bool stream, bool include_usage,
                      bool logprobs)
      : completion_(tokenizer, std::move(identity), std::move(options), include_usage, logprobs),
        stream_(stream) {}
  bool streaming() const override { return stream_; }
  std::vector<std::string> Start() override { return {}; }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const TokenLogprob> logprobs) override {
    if (stream_) return completion_.PushEvents(ids, logprobs);
    completion_.Push(ids, logprobs);
    return {};
  }
  std::vector<std::string> Finish(text::FinishReason reason, const Usage& usage) override {
    if (stream_) return completion_.FinishEvents(reason, usage);
    return {Dump(completion_.FinishBody(reason, usage))};
  }
  bool output_finished() const override { return completion_.output_finished(); }

 private:
  TextCompletion completion_;
  bool stream_;
};

}  // namespace

std::unique_ptr<ResponseFormatter> MakeChatFormatter(const tok::Tokenizer& tokenizer,
                                                     ResponseIdentity identity,
                                                     text::OutputParserOptions options, bool stream,
                                                     bool include_usage, bool logprobs) {
  if (stream) {
    return std::make_unique<ChatStreamFormatter>(tokenizer, std::move(identity), std::move(options),
                                                 include_usage, logprobs);
  }
  return std::make_unique<ChatWholeFormatter>(tokenizer, std::move(identity), std::move(options),
                                              logprobs);
}

std::unique_ptr<ResponseFormatter> MakeCompletionFormatter(const tok::Tokenizer& tokenizer,
                                                           ResponseIdentity identity,
                                                           text::OutputParserOptions options,
                                                           bool stream, bool include_usage,
                                                           bool logprobs) {
  return std::make_unique<CompletionFormatter>(tokenizer, std::move(identity), std::move(options),
                                               stream, include_usage, logprobs);
}

}  // namespace m3::openai
