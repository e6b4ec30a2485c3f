// Anthropic messages behind the ResponseFormatter interface (see message_formatter.h).
#include "gateway/anthropic/message_formatter.h"

#include <utility>

#include "gateway/anthropic/error_body.h"
#include "gateway/anthropic/message_body.h"
#include "gateway/anthropic/message_stream.h"

namespace m3::anthropic {
namespace {

// The error shape both formatters share.
class AnthropicFormatter : public openai::ResponseFormatter {
 public:
  std::string ErrorBody(int status, std::string_view message, std::string_view) const override {
    return anthropic::ErrorBody(status, message)
        .dump(-1, ' ', false, OJson::error_handler_t::replace);
  }
  std::vector<std::string> StreamErrorEvents(int status, std::string_view message,
                                             std::string_view) const override {
    return {SseEvent("error", anthropic::ErrorBody(status, message))};
  }
};

class StreamFormatter : public AnthropicFormatter {
 public:
  StreamFormatter(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
                  text::OutputParserOptions options, int64_t input_tokens)
      : stream_(tokenizer, std::move(identity), std::move(options), input_tokens) {}
  bool streaming() const override { return true; }
  std::vector<std::string> Start() override { return stream_.Start(); }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const openai::TokenLogprob>) override {
    return stream_.Push(ids);
  }
  std::vector<std::string> Finish(text::FinishReason reason, const openai::Usage& usage) override {
    return stream_.Finish(reason, usage);
  }
  bool output_finished() const override { return stream_.output_finished(); }

 private:
  MessageStream stream_;
};

class WholeFormatter : public AnthropicFormatter {
 public:
  WholeFormatter(const tok::Tokenizer& tokenizer, openai::ResponseIdentity identity,
                 text::OutputParserOptions options)
      : body_(tokenizer, std::move(identity), std::move(options)) {}
  bool streaming() const override { return false; }
  std::vector<std::string> Start() override { return {}; }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const openai::TokenLogprob>) override {
    body_.Push(ids);
    return {};
  }
  std::vector<std::string> Finish(text::FinishReason reason, const openai::Usage& usage) override {
    return {body_.Finish(reason, usage).dump(-1, ' ', false, OJson::error_handler_t::replace)};
  }
  bool output_finished() const override { return body_.output_finished(); }

 private:
  MessageBody body_;
};

}  // namespace

std::unique_ptr<openai::ResponseFormatter> MakeMessageFormatter(const tok::Tokenizer& tokenizer,
                                                                openai::ResponseIdentity identity,
                                                                text::OutputParserOptions options,
                                                                bool stream, int64_t input_tokens) {
  if (stream) {
    return std::make_unique<StreamFormatter>(tokenizer, std::move(identity), std::move(options),
                                             input_tokens);
  }
  return std::make_unique<WholeFormatter>(tokenizer, std::move(identity), std::move(options));
}

}  // namespace m3::anthropic
